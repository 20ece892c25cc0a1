package org.stampede;

/**
 * Options of a channel's input connection: how far it may fall behind (docs/SEMANTICS.md, "Slow
 * readers: max_lag"). Beyond either bound the oldest unseen items are consumed for the connection
 * and counted as skipped, so a slow reader cannot hold ts_min back; what it has gotten stays until
 * it consumes it. Immutable: each {@code with...} returns a new value.
 *
 * <pre>{@code
 * ChannelInput in = display.attachInput(frames, InputOptions.DEFAULT.withMaxLagItems(30));
 * }</pre>
 */
public final class InputOptions {
    /** No bound: the reader holds every item it has not consumed. */
    public static final InputOptions DEFAULT = new InputOptions(-1, -1);

    final long maxLagItems;
    final long maxLagTs;

    private InputOptions(long maxLagItems, long maxLagTs) {
        this.maxLagItems = maxLagItems;
        this.maxLagTs = maxLagTs;
    }

    /** At most this many unseen items (0 is {@code InvalidArgument}; -1: no bound). */
    public InputOptions withMaxLagItems(long maxLagItems) {
        return new InputOptions(maxLagItems, maxLagTs);
    }

    /** No unseen item more than this timestamp distance below the channel's newest (-1: no bound). */
    public InputOptions withMaxLagTs(long maxLagTs) {
        return new InputOptions(maxLagItems, maxLagTs);
    }
}
