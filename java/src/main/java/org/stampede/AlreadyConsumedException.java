package org.stampede;

import java.util.OptionalLong;

/**
 * An exact get of an item this connection has already consumed (or that was present below the
 * task's visibility when it attached).
 */
public final class AlreadyConsumedException extends StampedeException {
    private static final long serialVersionUID = 1L;

    AlreadyConsumedException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
