package org.stampede;

import java.lang.ref.Reference;

/**
 * A task's output connection to a channel. Errors of a put: {@code InvalidTimestamp} (negative, or
 * INFINITY), {@code BelowVisibility} (below the task's visibility), {@code DuplicateTimestamp} (the
 * channel holds or has reclaimed that timestamp), {@code Full} (a bounded channel stayed full until the
 * timeout), {@code InvalidArgument} (a refcount of 0, a codec the channel does not declare, a malformed
 * {@code npy} payload), {@code Closed}. Thread-safe.
 *
 * <p>Every put copies the data once (the caller may reuse its array or buffer when put returns), except
 * {@link #put(long, Item, PutOptions)}, which shares the item's bytes. Do not change an array or buffer
 * from another thread while a put reads it. Without options a put waits as long as needed for room.
 */
public final class ChannelOutput extends Output {
    ChannelOutput(long handle, Channel channel) {
        super(handle, channel);
    }

    /** The channel this connection puts into. */
    public Channel channel() {
        return (Channel) container;
    }

    /**
     * Demand feedback (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the
     * lowest timestamp any current or future consumer may still get if it were put now. A source
     * may skip producing frames below it: nobody would read them.
     */
    public long demand() throws StampedeException {
        try {
            return Native.outputDemand(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Waits until every put of this connection landed or failed, and throws the oldest error of a
     * pipelined put not thrown yet ({@link Task#attachOutput(Channel, int)}). Returns at once for a
     * connection without a put window, and embedded.
     */
    public void flush() throws StampedeException {
        try {
            Native.outputFlush(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }
}
