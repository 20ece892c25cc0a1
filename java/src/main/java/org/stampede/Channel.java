package org.stampede;

import java.lang.ref.Reference;
import java.util.Optional;

/**
 * A named channel of timestamped items, at most one per timestamp (docs/SEMANTICS.md, "Channels").
 * A task attaches to it ({@link Task#attachInput(Channel)}, {@link Task#attachOutput(Channel)}) to
 * get and put. Handles are equal when they refer to the same channel through the same runtime.
 * Thread-safe.
 */
public final class Channel extends Container {
    Channel(long handle) {
        super(handle);
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
}
