package org.stampede;

import java.util.OptionalLong;

/**
 * An argument outside its documented range: a bad name, a zero bound, a refcount of 0, a null
 * where a value is required, a malformed {@code .npy} payload. {@link #reason()} names the rule.
 */
public final class InvalidArgumentException extends StampedeException {
    private static final long serialVersionUID = 1L;

    InvalidArgumentException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
