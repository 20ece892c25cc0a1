package org.stampede;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The native bytes Java's items and buffers hold, and the garbage collection they may need.
 *
 * <p>An item's bytes live outside the Java heap, and buffers over them are released by a cleaner once
 * unreachable: a loop that gets large frames but allocates little on the heap could hold gigabytes
 * before the collector runs. So, as {@code java.nio.Bits} does for direct buffers, when the bytes held
 * have grown by {@code stampede.heldBytesMax} (default 256 MiB) since the last request, this asks for a
 * collection ({@link System#gc()}), whose cleaners then release what is unreachable.
 */
final class HeldBytes {
    /** How much the held bytes may grow before a collection is requested. */
    static final long GROWTH_MAX = Long.getLong("stampede.heldBytesMax", 256L << 20);

    private static final AtomicLong held = new AtomicLong();
    private static final AtomicLong gcAt = new AtomicLong(GROWTH_MAX);

    private HeldBytes() {}

    static void add(long bytes) {
        long now = held.addAndGet(bytes);
        long at = gcAt.get();
        if (now > at && gcAt.compareAndSet(at, now + GROWTH_MAX)) {
            System.gc();
        }
    }

    static void remove(long bytes) {
        long now = held.addAndGet(-bytes);
        // Lower the mark as memory comes back, so the next growth is measured from here.
        gcAt.accumulateAndGet(now + GROWTH_MAX, Math::min);
    }

    /** The bytes held now. */
    static long held() {
        return held.get();
    }
}
