package org.stampede;

import java.lang.ref.Reference;
import java.util.OptionalLong;

/**
 * A named FIFO queue of timestamped items (docs/SEMANTICS.md, "Queues"): each item goes to exactly
 * one getter and is reclaimed when that getter consumes it. Duplicate timestamps are allowed.
 * Thread-safe.
 */
public final class Queue implements Container {
    final long handle;
    private final String name;
    private final long id;

    Queue(long handle) {
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

    @Override
    public Stats stats() {
        try {
            return Stats.of(Native.containerStats(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

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
            return other instanceof Queue q && q.id == id && Native.containerEquals(handle, q.handle);
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
        return "Queue(\"" + name + "\")";
    }
}
