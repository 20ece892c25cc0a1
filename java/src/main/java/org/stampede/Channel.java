package org.stampede;

import java.lang.ref.Reference;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A named channel of timestamped items, at most one per timestamp (docs/SEMANTICS.md, "Channels").
 * A task attaches to it ({@link Task#attachInput(Channel)}, {@link Task#attachOutput(Channel)}) to
 * get and put. Handles are equal when they refer to the same channel through the same runtime.
 * Thread-safe.
 */
public final class Channel implements Container {
    final long handle;
    private final String name;
    private final long id;

    Channel(long handle) {
        this.handle = handle;
        Native.own(this, handle);
        this.name = Native.containerName(handle);
        this.id = Native.containerId(handle);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public OptionalLong capacity() {
        return Info.optional(limits()[0]);
    }

    @Override
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

    /** Counters now: live items and bytes, reclaimed, puts, gets, connections, ts_min, handler errors. */
    @Override
    public Stats stats() {
        try {
            return Stats.of(Native.containerStats(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The timestamps of the items stored now, in order. */
    public long[] timestamps() throws StampedeException {
        try {
            return Native.channelTimestamps(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The channel's retention policy. */
    public Retention retention() {
        try {
            return Native.channelRetention(handle) == 1 ? Retention.CURRENT_READERS : Retention.HISTORY;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Every timestamp below the returned one is settled: no task can still put it
     * (docs/CORRELATION.md, "Settled timestamps").
     */
    public long settledBelow() {
        try {
            return Native.channelSettledBelow(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** {@code true} when no task can still put {@code ts} into this channel. */
    public boolean isSettled(long ts) {
        return ts < settledBelow();
    }

    /**
     * Declares the producer set closed: attaching another output fails from now on, and settledness
     * follows only the tasks holding outputs now.
     */
    public void closeProducers() throws StampedeException {
        try {
            Native.channelCloseProducers(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** {@code true} once {@link #closeProducers()} ran. */
    public boolean producersClosed() {
        try {
            return Native.channelProducersClosed(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** What the channel's disk tier holds now; empty without a tier or through a client. */
    public Optional<DiskStats> diskStats() {
        try {
            return Optional.ofNullable(DiskStats.of(Native.channelDiskStats(handle)));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Sets (or, with null, removes) the GC handler called with the timestamp of each item this channel
     * reclaims, replacing the previous one ({@link ReclaimHandler} says where and when it runs).
     */
    @Override
    public void onReclaim(ReclaimHandler handler) throws StampedeException {
        try {
            Native.containerOnReclaim(handle, handler);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    @Override
    public Info info() {
        try {
            return Info.of(Native.containerInfo(handle), Native.containerLimits(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    @Override
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
            return other instanceof Channel c && c.id == id && Native.containerEquals(handle, c.handle);
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
        return "Channel(\"" + name + "\")";
    }
}
