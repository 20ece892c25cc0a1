package org.stampede;

/**
 * Which item a channel get asks for (docs/SEMANTICS.md, "Channels"): an exact timestamp
 * ({@link #at}), or a wildcard over the items present and not consumed on the connection —
 * {@link #OLDEST}, {@link #NEWEST}, {@link #OLDEST_UNSEEN} (in-order stream reading),
 * {@link #NEWEST_UNSEEN} (the freshest frame, skipping the rest). Immutable.
 */
public final class Selector {
    static final int AT = 0;
    static final int KIND_OLDEST = 1;
    static final int KIND_NEWEST = 2;
    static final int KIND_OLDEST_UNSEEN = 3;
    static final int KIND_NEWEST_UNSEEN = 4;

    /** The lowest timestamp present and not consumed on this connection. */
    public static final Selector OLDEST = new Selector(KIND_OLDEST, 0);
    /** The highest timestamp present and not consumed on this connection. */
    public static final Selector NEWEST = new Selector(KIND_NEWEST, 0);
    /** The lowest timestamp not yet gotten on this connection. */
    public static final Selector OLDEST_UNSEEN = new Selector(KIND_OLDEST_UNSEEN, 0);
    /** The highest timestamp not yet gotten on this connection. */
    public static final Selector NEWEST_UNSEEN = new Selector(KIND_NEWEST_UNSEEN, 0);

    final int kind;
    final long ts;

    private Selector(int kind, long ts) {
        this.kind = kind;
        this.ts = ts;
    }

    /** Exactly the item at {@code ts}. */
    public static Selector at(long ts) {
        return new Selector(AT, ts);
    }

    /** {@code true} for an exact timestamp. */
    public boolean isExact() {
        return kind == AT;
    }

    /** The timestamp of an exact selector. */
    public long ts() {
        return ts;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Selector s && s.kind == kind && s.ts == ts;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(ts) * 31 + kind;
    }

    /** As Rust and the error messages write it: {@code ts=5}, {@code OLDEST}, ... */
    @Override
    public String toString() {
        switch (kind) {
            case KIND_OLDEST:
                return "OLDEST";
            case KIND_NEWEST:
                return "NEWEST";
            case KIND_OLDEST_UNSEEN:
                return "OLDEST_UNSEEN";
            case KIND_NEWEST_UNSEEN:
                return "NEWEST_UNSEEN";
            default:
                return "ts=" + ts;
        }
    }
}
