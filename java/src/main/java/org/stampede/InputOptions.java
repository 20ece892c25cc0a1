package org.stampede;

/**
 * Options of a channel's input connection: how far it may fall behind (docs/SEMANTICS.md, "Slow
 * readers: max_lag"), and what a node pushes ahead of its gets ({@link Prefetch}). Beyond either
 * bound the oldest unseen items are consumed for the connection and counted as skipped, so a slow
 * reader cannot hold ts_min back; what it has gotten stays until it consumes it. Immutable: each
 * {@code with...} returns a new value.
 *
 * <pre>{@code
 * ChannelInput in = display.attachInput(frames, InputOptions.DEFAULT.withMaxLagItems(30));
 * }</pre>
 */
public final class InputOptions {
    /** No bound: the reader holds every item it has not consumed. */
    public static final InputOptions DEFAULT = new InputOptions(-1, -1, null);

    final long maxLagItems;
    final long maxLagTs;
    /** {@code null}: the runtime's default ({@link Prefetch#AUTO}). */
    final Prefetch prefetch;

    private InputOptions(long maxLagItems, long maxLagTs, Prefetch prefetch) {
        this.maxLagItems = maxLagItems;
        this.maxLagTs = maxLagTs;
        this.prefetch = prefetch;
    }

    /** At most this many unseen items (0 is {@code InvalidArgument}; -1: no bound). */
    public InputOptions withMaxLagItems(long maxLagItems) {
        return new InputOptions(maxLagItems, maxLagTs, prefetch);
    }

    /** No unseen item more than this timestamp distance below the channel's newest (-1: no bound). */
    public InputOptions withMaxLagTs(long maxLagTs) {
        return new InputOptions(maxLagItems, maxLagTs, prefetch);
    }

    /** What the node pushes ahead of the connection's gets ({@code null}: the runtime's default). */
    public InputOptions withPrefetch(Prefetch prefetch) {
        return new InputOptions(maxLagItems, maxLagTs, prefetch);
    }
}
