package org.stampede;

import java.util.OptionalLong;

/**
 * The node's access policy does not give this client's user the {@link #right()} ({@code read},
 * {@code write}, {@code create}, or {@code connect} for a missing or wrong password) on the name.
 * Nothing was done and nothing is returned.
 */
public final class PermissionDeniedException extends StampedeException {
    private static final long serialVersionUID = 1L;

    private final String right;

    PermissionDeniedException(String message, String name, OptionalLong ts, String reason, String right) {
        super(message, name, ts, reason);
        this.right = right;
    }

    /** The right that was missing. */
    public String right() {
        return right;
    }
}
