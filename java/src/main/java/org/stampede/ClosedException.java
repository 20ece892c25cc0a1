package org.stampede;

import java.util.OptionalLong;

/**
 * The channel or queue was destroyed, the connection detached, the task, the item or the runtime
 * closed, before or while the operation ran. {@link #reason()} says which.
 */
public final class ClosedException extends StampedeException {
    private static final long serialVersionUID = 1L;

    ClosedException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
