package org.stampede;

import java.lang.ref.Reference;

/**
 * What every connection is: a task's attachment to a channel or queue, which {@link #detach()} (or
 * {@link #close()}) ends. Detaching is idempotent and may be called while another thread is blocked
 * in a get or put on the connection: that call returns {@code ClosedException}. Every later call fails
 * {@code Closed}. A connection that is never detached detaches when it becomes unreachable.
 */
public abstract sealed class Connection implements AutoCloseable permits ChannelInput, QueueInput, Output {
    final long handle;
    /** The channel or queue it is attached to. */
    final Container container;

    Connection(long handle, Container container) {
        this.handle = handle;
        this.container = container;
        Native.own(this, handle);
    }

    /** The container's name. */
    public String name() {
        return container.name();
    }

    /** Detaches the connection (idempotent); an input's claims are dropped. */
    public void detach() {
        try {
            Native.detach(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** {@link #detach()}. */
    @Override
    public void close() {
        detach();
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(\"" + name() + "\")";
    }
}
