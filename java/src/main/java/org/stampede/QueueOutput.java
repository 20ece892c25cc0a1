package org.stampede;

/**
 * A task's output connection to a queue: puts append in FIFO order (duplicate timestamps allowed).
 * A reference count is refused ({@code InvalidArgument}): a queue item goes to exactly one getter.
 * Thread-safe.
 *
 * <p>Every put copies the data once (the caller may reuse its array or buffer when put returns), except
 * {@link #put(long, Item, PutOptions)}, which shares the item's bytes. Do not change an array or buffer
 * from another thread while a put reads it. Without options a put waits as long as needed for room.
 */
public final class QueueOutput extends Output {
    QueueOutput(long handle, Queue queue) {
        super(handle, queue);
    }

    /** The queue this connection puts into. */
    public Queue queue() {
        return (Queue) container;
    }
}
