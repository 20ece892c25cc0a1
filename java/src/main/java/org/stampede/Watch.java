package org.stampede;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.Optional;

/**
 * The names under a prefix — those that exist, then each creation and destruction — and, through a
 * client, nodes up and down ({@link Runtime#watch}). Closing it (or its becoming unreachable) ends
 * the subscription. One thread at a time reads it.
 */
public final class Watch implements AutoCloseable {
    private final long handle;
    private final long timeoutNanos;
    private final Cleaner.Cleanable cleanable;

    Watch(long handle, long timeoutNanos) {
        this.handle = handle;
        this.timeoutNanos = timeoutNanos;
        this.cleanable = Native.own(this, handle);
    }

    /**
     * The next event; empty when nothing happened within the watch's timeout, or the runtime closed.
     *
     * @throws ClosedException the watch was closed
     * @throws UnreachableException the node could not be reached
     */
    public Optional<WatchEvent> next() throws StampedeException {
        try {
            String[] fields = Native.watchNext(handle, timeoutNanos);
            return fields == null ? Optional.empty() : Optional.of(WatchEvent.of(fields));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Ends the watch now. */
    @Override
    public void close() {
        cleanable.clean();
    }
}
