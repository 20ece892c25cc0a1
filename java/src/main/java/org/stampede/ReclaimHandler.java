package org.stampede;

/**
 * A GC handler of one channel or queue ({@link Channel#onReclaim}): called with the timestamp of each
 * item it reclaims — for buffer recycling, cleanup, "frame dropped" statistics.
 *
 * <p>It runs on the thread whose operation made the item garbage (a Java thread inside a put, consume,
 * set-virtual-time or close; through a client, a thread of the fabric), outside every runtime lock,
 * before that operation returns. What it throws goes to that thread's uncaught-exception handler and
 * is counted in {@link Stats#handlerErrors()}; it never reaches the runtime. Keep it short.
 */
@FunctionalInterface
public interface ReclaimHandler {
    /** The item at {@code ts} was reclaimed. */
    void reclaimed(long ts);
}
