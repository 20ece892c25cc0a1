package org.stampede;

import java.util.OptionalLong;

/**
 * No channel or queue has this name.
 */
public final class NotFoundException extends StampedeException {
    private static final long serialVersionUID = 1L;

    NotFoundException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
