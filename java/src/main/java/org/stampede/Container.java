package org.stampede;

import java.lang.ref.Reference;
import java.util.OptionalLong;

/**
 * A channel or a queue: what {@link Runtime#lookup} returns and a task attaches to. Handles are equal
 * when they refer to the same container through the same runtime. Thread-safe.
 */
public abstract sealed class Container permits Channel, Queue {
    final long handle;
    private final String name;
    private final long id;

    Container(long handle) {
        this.handle = handle;
        Native.own(this, handle);
        this.name = Native.containerName(handle);
        this.id = Native.containerId(handle);
    }

    /** Its name. */
    public String name() {
        return name;
    }

    /** Its bound on items, if any. */
    public OptionalLong capacity() {
        return Info.optional(limits()[0]);
    }

    /** Its bound on payload bytes, if any. */
    public OptionalLong maxBytes() {
        return Info.optional(limits()[1]);
    }

    private long[] limits() {
        try {
            return Native.containerLimits(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Its counters now: live items and bytes, reclaimed, puts, gets, connections, ts_min, handler errors. */
    public Stats stats() {
        try {
            return Stats.of(Native.containerStats(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Sets (or, with null, removes) its GC handler, called with the timestamp of each item it reclaims,
     * replacing the previous one ({@link ReclaimHandler} says where and when it runs).
     */
    public void onReclaim(ReclaimHandler handler) throws StampedeException {
        try {
            Native.containerOnReclaim(handle, handler);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** What the name service tells of it. */
    public Info info() {
        try {
            return Info.of(Native.containerInfo(handle), Native.containerLimits(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Destroys it: its items are reclaimed, its name freed, every operation on it fails {@code Closed}. */
    public void destroy() throws StampedeException {
        try {
            Native.containerDestroy(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    @Override
    public boolean equals(Object other) {
        try {
            return other instanceof Container c && c.getClass() == getClass() && c.id == id
                    && Native.containerEquals(handle, c.handle);
        } finally {
            Reference.reachabilityFence(this);
            Reference.reachabilityFence(other);
        }
    }

    @Override
    public int hashCode() {
        return Long.hashCode(id);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(\"" + name + "\")";
    }
}
