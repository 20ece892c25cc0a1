package org.stampede;

/**
 * A GC handler of every channel and queue of a runtime ({@link Runtime#onReclaim}): called with the
 * container's name and the timestamp of each reclaimed item. Runs as {@link ReclaimHandler} does.
 */
@FunctionalInterface
public interface RuntimeReclaimHandler {
    /** The item at {@code ts} of the channel or queue {@code name} was reclaimed. */
    void reclaimed(String name, long ts);
}
