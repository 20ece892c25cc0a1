package org.stampede;

import java.lang.ref.Reference;
import java.time.Duration;

/**
 * A task's input connection to a queue (docs/SEMANTICS.md, "Queues"): a get takes the oldest
 * waiting item, which no other getter will see; it is open on this connection (holding the task's
 * visibility at its timestamp) until {@link #consume(Item)}d, which reclaims it. Detaching gives
 * the items it holds open back to the head of the queue. Thread-safe.
 */
public final class QueueInput extends Connection {
    QueueInput(long handle, Queue queue) {
        super(handle, queue);
    }

    /** The queue this connection gets from. */
    public Queue queue() {
        return (Queue) container;
    }

    /** {@link #get(Duration)}, waiting as long as needed. */
    public Item get() throws StampedeException {
        return get(null);
    }

    /**
     * Takes the oldest waiting item ({@code NotAvailable} when the timeout expires; null waits as long
     * as needed, {@link Duration#ZERO} never waits). Blocked getters are served first come, first served.
     */
    public Item get(Duration timeout) throws StampedeException {
        long nanos = Native.nanos(timeout, "get", name());
        try {
            return Native.queueGet(handle, nanos);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Consumes an item this connection got (by its sequence number); the queue reclaims it. */
    public void consume(Item item) throws StampedeException {
        Errors.require(item, "consume", name(), "the item");
        if (item.seq().isEmpty()) {
            throw Errors.invalid("consume", name(), "item ts=" + item.ts() + " came from a channel, not a queue");
        }
        try {
            Native.queueConsume(handle, item.seq().getAsLong(), item.ts());
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Consumes the oldest item open on this connection at {@code ts}. */
    public void consume(long ts) throws StampedeException {
        try {
            Native.queueConsume(handle, -1, ts);
        } finally {
            Reference.reachabilityFence(this);
        }
    }
}
