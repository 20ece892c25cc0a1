package org.stampede;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * An output connection, to a channel ({@link ChannelOutput}) or a queue ({@link QueueOutput}): the
 * puts both share. A put copies the caller's bytes exactly once, into the buffer the container will
 * hold (copy-in: the caller may reuse its array or buffer as soon as put returns); an item put again
 * shares its bytes without a copy. Do not change an array or buffer from another thread while a put
 * reads it. Without options a put waits as long as needed for room.
 */
public abstract sealed class Output extends Connection permits ChannelOutput, QueueOutput {
    Output(long handle, Container container) {
        super(handle, container);
    }

    /** Puts the bytes of {@code data} at {@code ts}, codec {@code raw}. */
    public void put(long ts, byte[] data) throws StampedeException {
        send(this, ts, data, 0, data == null ? 0 : data.length, PutOptions.DEFAULT, Codec.RAW);
    }

    /** Puts the bytes of {@code data} at {@code ts} (codec {@code raw} unless the options say). */
    public void put(long ts, byte[] data, PutOptions options) throws StampedeException {
        send(this, ts, data, 0, data == null ? 0 : data.length, options, Codec.RAW);
    }

    /** Puts {@code length} bytes of {@code data} from {@code offset} at {@code ts}. */
    public void put(long ts, byte[] data, int offset, int length, PutOptions options) throws StampedeException {
        send(this, ts, data, offset, length, options, Codec.RAW);
    }

    /**
     * Puts the remaining bytes of {@code data} (position to limit; the position does not move). A direct
     * buffer, or an {@link Item#data()} view, is copied straight from its memory.
     */
    public void put(long ts, ByteBuffer data) throws StampedeException {
        send(this, ts, data, PutOptions.DEFAULT);
    }

    /** {@link #put(long, ByteBuffer)} with options. */
    public void put(long ts, ByteBuffer data, PutOptions options) throws StampedeException {
        send(this, ts, data, options);
    }

    /** Puts {@code text} encoded in UTF-8, codec {@code utf8}. */
    public void put(long ts, String text) throws StampedeException {
        send(this, ts, text, PutOptions.DEFAULT);
    }

    /** {@link #put(long, String)} with options (e.g. codec {@code json}). */
    public void put(long ts, String text, PutOptions options) throws StampedeException {
        send(this, ts, text, options);
    }

    /** Puts another item's bytes and codec at {@code ts} without copying them (items are immutable). */
    public void put(long ts, Item item) throws StampedeException {
        send(this, ts, item, PutOptions.DEFAULT);
    }

    /** {@link #put(long, Item)} with options (a codec given there replaces the item's). */
    public void put(long ts, Item item, PutOptions options) throws StampedeException {
        send(this, ts, item, options);
    }

    private static void send(Output out, long ts, byte[] data, int offset, int length, PutOptions options,
            String defaultCodec) throws StampedeException {
        PutOptions o = options == null ? PutOptions.DEFAULT : options;
        Errors.require(data, "put", out.name(), "the data");
        if (offset < 0 || length < 0 || offset > data.length - length) {
            throw Errors.invalid("put", out.name(), "offset " + offset + " and length " + length
                    + " do not lie within the " + data.length + " bytes of the array");
        }
        String codec = o.codec != null ? o.codec : defaultCodec;
        long nanos = Native.nanos(o.timeout, "put", out.name());
        try {
            Native.putArray(out.handle, ts, data, offset, length, Codec.kind(codec), codec, o.refcount, nanos);
        } finally {
            Reference.reachabilityFence(out);
        }
    }

    private static void send(Output out, long ts, ByteBuffer data, PutOptions options) throws StampedeException {
        PutOptions o = options == null ? PutOptions.DEFAULT : options;
        Errors.require(data, "put", out.name(), "the data");
        if (data.isDirect()) {
            String codec = o.codec != null ? o.codec : Codec.RAW;
            long nanos = Native.nanos(o.timeout, "put", out.name());
            try {
                Native.putDirect(out.handle, ts, data, data.position(), data.remaining(), Codec.kind(codec), codec,
                        o.refcount, nanos);
            } finally {
                Reference.reachabilityFence(out);
                Reference.reachabilityFence(data);
            }
        } else if (data.hasArray()) {
            send(out, ts, data.array(), data.arrayOffset() + data.position(), data.remaining(), o, Codec.RAW);
        } else {
            // A read-only heap buffer hides its array: one extra copy.
            byte[] copy = new byte[data.remaining()];
            data.duplicate().get(copy);
            send(out, ts, copy, 0, copy.length, o, Codec.RAW);
        }
    }

    private static void send(Output out, long ts, String text, PutOptions options) throws StampedeException {
        Errors.require(text, "put", out.name(), "the text");
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        send(out, ts, bytes, 0, bytes.length, options, Codec.UTF8);
    }

    private static void send(Output out, long ts, Item item, PutOptions options) throws StampedeException {
        PutOptions o = options == null ? PutOptions.DEFAULT : options;
        Errors.require(item, "put", out.name(), "the item");
        long nanos = Native.nanos(o.timeout, "put", out.name());
        long handle = item.openHandle();
        try {
            Native.putItem(out.handle, ts, handle, o.codec == null ? -1 : Codec.kind(o.codec), o.codec, o.refcount,
                    nanos);
        } finally {
            Reference.reachabilityFence(out);
            Reference.reachabilityFence(item);
        }
    }
}
