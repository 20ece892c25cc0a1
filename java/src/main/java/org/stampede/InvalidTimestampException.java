package org.stampede;

import java.util.OptionalLong;

/**
 * A negative timestamp, or {@link Stampede#INFINITY} used as an item timestamp, or a negative
 * virtual time for a new task.
 */
public final class InvalidTimestampException extends StampedeException {
    private static final long serialVersionUID = 1L;

    InvalidTimestampException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
