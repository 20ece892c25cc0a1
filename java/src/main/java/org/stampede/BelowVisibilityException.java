package org.stampede;

import java.util.OptionalLong;

/**
 * A put, {@code setVirtualTime}, {@code spawn} or new root task asked for a timestamp below what the
 * task allows (its visibility) or, for a root task, below ts_min. {@link #limit()} is that bound.
 */
public final class BelowVisibilityException extends StampedeException {
    private static final long serialVersionUID = 1L;

    private final long limit;

    BelowVisibilityException(String message, String name, OptionalLong ts, String reason, long limit) {
        super(message, name, ts, reason);
        this.limit = limit;
    }

    /** The visibility (or ts_min) the timestamp fell below. */
    public long limit() {
        return limit;
    }
}
