package org.stampede;

import java.util.OptionalLong;

/**
 * The fabric failed a remote call: the node could not be reached, stopped answering, or this
 * client's session on it ended. What the call did on the node is unknown unless the reason says.
 */
public final class UnreachableException extends StampedeException {
    private static final long serialVersionUID = 1L;

    UnreachableException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
