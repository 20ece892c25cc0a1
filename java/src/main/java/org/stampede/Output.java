package org.stampede;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The puts both output connections share. A put copies the caller's bytes exactly once, into the
 * buffer the container will hold (copy-in: the caller may reuse its array or buffer as soon as put
 * returns); an item put again shares its bytes without a copy.
 */
final class Output {
    private Output() {}

    static void put(Connection out, long ts, byte[] data, int offset, int length, PutOptions options,
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

    static void put(Connection out, long ts, ByteBuffer data, PutOptions options) throws StampedeException {
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
            put(out, ts, data.array(), data.arrayOffset() + data.position(), data.remaining(), o, Codec.RAW);
        } else {
            // A read-only heap buffer hides its array: one extra copy.
            byte[] copy = new byte[data.remaining()];
            data.duplicate().get(copy);
            put(out, ts, copy, 0, copy.length, o, Codec.RAW);
        }
    }

    static void put(Connection out, long ts, String text, PutOptions options) throws StampedeException {
        Errors.require(text, "put", out.name(), "the text");
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        put(out, ts, bytes, 0, bytes.length, options, Codec.UTF8);
    }

    static void put(Connection out, long ts, Item item, PutOptions options) throws StampedeException {
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
