package org.stampede;

import java.util.OptionalLong;

/**
 * A channel or queue of this name exists already.
 */
public final class AlreadyExistsException extends StampedeException {
    private static final long serialVersionUID = 1L;

    AlreadyExistsException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
