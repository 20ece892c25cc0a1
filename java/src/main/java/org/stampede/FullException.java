package org.stampede;

import java.util.OptionalLong;

/**
 * A bounded channel or queue stayed full until the put's timeout expired (a timeout of zero fails at
 * once), or the item is larger than the byte bound and can never fit ({@link #canNeverFit()}).
 */
public final class FullException extends StampedeException {
    private static final long serialVersionUID = 1L;

    private final boolean canNeverFit;

    FullException(String message, String name, OptionalLong ts, String reason, boolean canNeverFit) {
        super(message, name, ts, reason);
        this.canNeverFit = canNeverFit;
    }

    /** {@code true} when no amount of reclamation could make room: waiting is pointless. */
    public boolean canNeverFit() {
        return canNeverFit;
    }
}
