package org.stampede;

import java.util.OptionalLong;

/**
 * The errors the Java side raises itself, before a call reaches the native library (a null where a
 * value is required, a negative timeout), worded as the Rust errors are.
 */
final class Errors {
    private Errors() {}

    /** {@code InvalidArgument}: {@code <op> on "<name>": <reason>}. */
    static InvalidArgumentException invalid(String op, String name, String reason) {
        return new InvalidArgumentException(op + " on \"" + name + "\": " + reason, name, OptionalLong.empty(),
                reason);
    }

    /** {@code Closed}: {@code "<name>" is closed: <reason>}. */
    static ClosedException closed(String name, String reason) {
        return new ClosedException("\"" + name + "\" is closed: " + reason, name, OptionalLong.empty(), reason);
    }

    /** {@code NotFound}, as Rust words it for a name of the wrong kind. */
    static NotFoundException notFound(String name) {
        return new NotFoundException("no channel or queue is named \"" + name
                + "\"; create it first or check rt.names()", name, OptionalLong.empty(), null);
    }

    /** {@code value}, or {@code InvalidArgument} when it is null. */
    static <T> T require(T value, String op, String name, String what) throws InvalidArgumentException {
        if (value == null) {
            throw invalid(op, name, what + " is null");
        }
        return value;
    }
}
