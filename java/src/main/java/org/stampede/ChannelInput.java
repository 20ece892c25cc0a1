package org.stampede;

import java.lang.ref.Reference;
import java.time.Duration;
import java.util.List;

/**
 * A task's input connection to a channel: per item, a state unseen → open → consumed
 * (docs/SEMANTICS.md, "Channels"). Gets hand out {@link Item}s whose bytes are shared, never
 * copied. Thread-safe.
 */
public final class ChannelInput extends Connection {
    ChannelInput(long handle, Channel channel) {
        super(handle, channel);
    }

    /** The channel this connection reads. */
    public Channel channel() {
        return (Channel) container;
    }

    /** {@link #get(Selector, Duration)}, waiting as long as needed. */
    public Item get(Selector selector) throws StampedeException {
        return get(selector, null);
    }

    /** {@link #get(Selector, Duration)} of the item at exactly {@code ts}. */
    public Item get(long ts, Duration timeout) throws StampedeException {
        return get(Selector.at(ts), timeout);
    }

    /**
     * Gets an item; it becomes open on this connection. {@code timeout}: null waits as long as needed,
     * {@link Duration#ZERO} never waits. A blocked get wakes on an arrival, on the connection
     * detached, its task, the channel or the runtime closed.
     *
     * @throws NotAvailableException nothing suitable in time (with the neighbouring timestamps)
     * @throws AlreadyConsumedException an exact timestamp consumed on this connection
     * @throws ReclaimedException an exact timestamp below ts_min, or reclaimed by its reference count
     * @throws ClosedException detached, or the task, channel or runtime closed
     */
    public Item get(Selector selector, Duration timeout) throws StampedeException {
        Errors.require(selector, "get", name(), "the selector");
        long nanos = Native.nanos(timeout, "get", name());
        try {
            return Native.channelGet(handle, selector.kind, selector.ts, nanos);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Every item with {@code t0 <= ts <= t1} present and not consumed on this connection, in timestamp
     * order; each becomes open. Never waits. The caller closes each item.
     */
    public List<Item> getRange(long t0, long t1) throws StampedeException {
        try {
            return List.of(Native.channelGetRange(handle, t0, t1));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Marks the item at {@code ts} consumed on this connection ("garbage, as far as I am concerned").
     * A no-op for an item already consumed or reclaimed; {@code NotAvailable} for a timestamp never put.
     */
    public void consume(long ts) throws StampedeException {
        try {
            Native.channelConsume(handle, ts);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Marks every present item {@code <= ts} consumed on this connection, unseen ones included. */
    public void consumeUntil(long ts) throws StampedeException {
        try {
            Native.channelConsumeUntil(handle, ts);
        } finally {
            Reference.reachabilityFence(this);
        }
    }
}
