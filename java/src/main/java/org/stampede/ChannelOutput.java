package org.stampede;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;

/**
 * A task's output connection to a channel. Errors of a put: {@code InvalidTimestamp} (negative, or
 * INFINITY), {@code BelowVisibility} (below the task's visibility), {@code DuplicateTimestamp} (the
 * channel holds or has reclaimed that timestamp), {@code Full} (a bounded channel stayed full until the
 * timeout), {@code InvalidArgument} (a refcount of 0, a codec the channel does not declare, a malformed
 * {@code npy} payload), {@code Closed}. Thread-safe.
 *
 * <p>Every put copies the data once (the caller may reuse its array or buffer when put returns), except
 * {@link #put(long, Item, PutOptions)}, which shares the item's bytes. Do not change an array or buffer
 * from another thread while a put reads it. Without options a put waits as long as needed for room.
 */
public final class ChannelOutput extends Connection {
    private final Channel channel;

    ChannelOutput(long handle, Channel channel) {
        super(handle);
        this.channel = channel;
    }

    /** The channel this connection puts into. */
    public Channel channel() {
        return channel;
    }

    @Override
    public String name() {
        return channel.name();
    }

    /** Puts the bytes of {@code data} at {@code ts}, codec {@code raw}. */
    public void put(long ts, byte[] data) throws StampedeException {
        Output.put(this, ts, data, 0, data == null ? 0 : data.length, PutOptions.DEFAULT, Codec.RAW);
    }

    /** Puts the bytes of {@code data} at {@code ts} (codec {@code raw} unless the options say). */
    public void put(long ts, byte[] data, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, 0, data == null ? 0 : data.length, options, Codec.RAW);
    }

    /** Puts {@code length} bytes of {@code data} from {@code offset} at {@code ts}. */
    public void put(long ts, byte[] data, int offset, int length, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, offset, length, options, Codec.RAW);
    }

    /**
     * Puts the remaining bytes of {@code data} (position to limit; the position does not move). A direct
     * buffer, or an {@link Item#data()} view, is copied straight from its memory.
     */
    public void put(long ts, ByteBuffer data) throws StampedeException {
        Output.put(this, ts, data, PutOptions.DEFAULT);
    }

    /** {@link #put(long, ByteBuffer)} with options. */
    public void put(long ts, ByteBuffer data, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, options);
    }

    /** Puts {@code text} encoded in UTF-8, codec {@code utf8}. */
    public void put(long ts, String text) throws StampedeException {
        Output.put(this, ts, text, PutOptions.DEFAULT);
    }

    /** {@link #put(long, String)} with options (e.g. codec {@code json}). */
    public void put(long ts, String text, PutOptions options) throws StampedeException {
        Output.put(this, ts, text, options);
    }

    /** Puts another item's bytes and codec at {@code ts} without copying them (items are immutable). */
    public void put(long ts, Item item) throws StampedeException {
        Output.put(this, ts, item, PutOptions.DEFAULT);
    }

    /** {@link #put(long, Item)} with options (a codec given there replaces the item's). */
    public void put(long ts, Item item, PutOptions options) throws StampedeException {
        Output.put(this, ts, item, options);
    }

    /**
     * Demand feedback (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the
     * lowest timestamp any current or future consumer may still get if it were put now. A source
     * may skip producing frames below it: nobody would read them.
     */
    public long demand() throws StampedeException {
        try {
            return Native.outputDemand(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }
}
