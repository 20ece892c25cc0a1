package org.stampede;

import java.util.OptionalLong;

/**
 * Nothing suitable was present before the timeout (a get), or a consume named nothing this connection
 * can consume. {@link #previous()} and {@link #next()} are the neighbouring timestamps present and not
 * consumed on the connection (the papers' {@code timestamp_range}); {@link #settled()} says nothing
 * suitable can ever come. {@link #ts()} is the exact timestamp asked for, if any.
 */
public final class NotAvailableException extends StampedeException {
    private static final long serialVersionUID = 1L;

    private final String selector;
    private final OptionalLong previous;
    private final OptionalLong next;
    private final boolean settled;

    NotAvailableException(String message, String name, OptionalLong ts, String reason, String selector,
            OptionalLong previous, OptionalLong next, boolean settled) {
        super(message, name, ts, reason);
        this.selector = selector;
        this.previous = previous;
        this.next = next;
        this.settled = settled;
    }

    /** The selector asked for, as Rust writes it: {@code ts=5}, {@code OLDEST}, {@code NEWEST_UNSEEN}. */
    public String selector() {
        return selector;
    }

    /** The highest timestamp below the one asked for, present and not consumed on the connection. */
    public OptionalLong previous() {
        return previous;
    }

    /** The lowest timestamp above the one asked for, present and not consumed on the connection. */
    public OptionalLong next() {
        return next;
    }

    /** {@code true} when nothing suitable can ever arrive: waiting longer is pointless. */
    public boolean settled() {
        return settled;
    }
}
