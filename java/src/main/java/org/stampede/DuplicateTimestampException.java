package org.stampede;

import java.util.OptionalLong;

/**
 * The channel holds, or has reclaimed early by reference count, an item at this timestamp (one item
 * per timestamp).
 */
public final class DuplicateTimestampException extends StampedeException {
    private static final long serialVersionUID = 1L;

    DuplicateTimestampException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
