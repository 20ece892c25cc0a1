package org.stampede;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * The base of every Stampede error: a checked exception per error type, as Python's
 * {@code stampede.StampedeError} hierarchy (docs/SEMANTICS.md, "Errors"), with the message text of
 * the Rust error unchanged (it names the channel, the timestamp and the rule broken). The fields of
 * the error are accessors: {@link #name()}, {@link #ts()}, {@link #reason()}; subclasses add their
 * own.
 *
 * <p>One mapping: the Rust side ({@code crates/stampede-jni/src/errors.rs}) numbers the variants of
 * {@code stampede::Error}; {@link #fromNative} turns the number into the class.
 */
public class StampedeException extends Exception {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final OptionalLong ts;
    private final String reason;

    StampedeException(String message, String name, OptionalLong ts, String reason) {
        super(message);
        this.name = name;
        this.ts = ts;
        this.reason = reason;
    }

    /** The channel, queue, task or item the error is about. */
    public String name() {
        return name;
    }

    /** The timestamp the error is about, if it is about one. */
    public OptionalLong ts() {
        return ts;
    }

    /** Why, where the error type has a reason ({@code Closed}, {@code Full}, {@code InvalidArgument}...). */
    public Optional<String> reason() {
        return Optional.ofNullable(reason);
    }

    // ---- the native half of the mapping -------------------------------------------------------

    private static final int HAS_TS = 1;
    private static final int HAS_A = 2;
    private static final int HAS_B = 4;
    private static final int SETTLED = 8;
    private static final int CAN_NEVER_FIT = 16;

    /**
     * Creates the exception for a {@code stampede::Error} variant numbered {@code kind} (called by the
     * native library only). {@code detail}: the selector or the right; {@code a}: previous or limit;
     * {@code b}: next; {@code flags}: which optional fields are present.
     */
    static StampedeException fromNative(int kind, String message, String name, String reason, String detail,
            long ts, long a, long b, int flags) {
        OptionalLong t = (flags & HAS_TS) != 0 ? OptionalLong.of(ts) : OptionalLong.empty();
        OptionalLong first = (flags & HAS_A) != 0 ? OptionalLong.of(a) : OptionalLong.empty();
        OptionalLong second = (flags & HAS_B) != 0 ? OptionalLong.of(b) : OptionalLong.empty();
        switch (kind) {
            case 0:
                return new BelowVisibilityException(message, name, t, reason, a);
            case 1:
                return new DuplicateTimestampException(message, name, t, reason);
            case 2:
                return new InvalidTimestampException(message, name, t, reason);
            case 3:
                return new FullException(message, name, t, reason, (flags & CAN_NEVER_FIT) != 0);
            case 4:
                return new NotAvailableException(message, name, t, reason, detail, first, second,
                        (flags & SETTLED) != 0);
            case 5:
                return new AlreadyConsumedException(message, name, t, reason);
            case 6:
                return new ReclaimedException(message, name, t, reason);
            case 7:
                return new ClosedException(message, name, t, reason);
            case 8:
                return new NotFoundException(message, name, t, reason);
            case 9:
                return new AlreadyExistsException(message, name, t, reason);
            case 10:
                return new InvalidArgumentException(message, name, t, reason);
            case 11:
                return new UnreachableException(message, name, t, reason);
            case 12:
                return new PermissionDeniedException(message, name, t, reason, detail);
            case 13:
                return new StorageException(message, name, t, reason);
            default:
                return new StampedeException(message, name, t, reason);
        }
    }
}
