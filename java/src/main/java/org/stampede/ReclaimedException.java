package org.stampede;

import java.util.OptionalLong;

/**
 * An exact get below ts_min, or of an item reclaimed early by its reference count.
 */
public final class ReclaimedException extends StampedeException {
    private static final long serialVersionUID = 1L;

    ReclaimedException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
