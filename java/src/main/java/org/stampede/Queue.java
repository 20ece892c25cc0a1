package org.stampede;

/**
 * A named FIFO queue of timestamped items (docs/SEMANTICS.md, "Queues"): each item goes to exactly
 * one getter and is reclaimed when that getter consumes it. Duplicate timestamps are allowed.
 * Thread-safe.
 */
public final class Queue extends Container {
    Queue(long handle) {
        super(handle);
    }
}
