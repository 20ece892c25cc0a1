package org.stampede;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;

/**
 * {@code .npy} payloads (codec {@link Codec#NPY}, docs/SEMANTICS.md, "npy payloads") from Java:
 * reading a header (through {@code stampede::npy}, the one parser every client shares) and writing
 * one, so that a Java camera's frames are arrays a Python task reads with {@code item.array()}.
 */
public final class Npy {
    private Npy() {}

    /** The header of a {@code .npy} payload ({@code InvalidArgument} naming the rule it breaks). */
    public static NpyHeader header(byte[] payload) throws StampedeException {
        Errors.require(payload, "npy", "header", "the payload");
        return Native.npyHeaderArray(payload, 0, payload.length);
    }

    /** The header of the remaining bytes of {@code payload} (a direct buffer is read in place). */
    public static NpyHeader header(ByteBuffer payload) throws StampedeException {
        Errors.require(payload, "npy", "header", "the payload");
        if (payload.isDirect()) {
            try {
                return Native.npyHeaderDirect(payload, payload.position(), payload.remaining());
            } finally {
                Reference.reachabilityFence(payload);
            }
        }
        byte[] copy = new byte[payload.remaining()];
        payload.duplicate().get(copy);
        return header(copy);
    }

    /**
     * The header of a C-order array of dtype {@code descr} (as NumPy's {@code dtype.str} writes it:
     * {@code |u1}, {@code <f4}, {@code <i2}) and {@code shape}, as NumPy writes it (version 1.0, padded
     * so the data starts 64-byte aligned). The array's bytes follow it in the payload.
     */
    public static byte[] encodeHeader(String descr, long... shape) throws StampedeException {
        Errors.require(descr, "npy", "header", "the dtype");
        Errors.require(shape, "npy", "header", "the shape");
        return Native.npyEncodeHeader(descr, shape);
    }

    /** A whole {@code .npy} payload: {@link #encodeHeader} followed by {@code data} (a copy). */
    public static byte[] encode(String descr, long[] shape, byte[] data) throws StampedeException {
        Errors.require(data, "npy", "encode", "the data");
        byte[] header = encodeHeader(descr, shape);
        byte[] payload = new byte[header.length + data.length];
        System.arraycopy(header, 0, payload, 0, header.length);
        System.arraycopy(data, 0, payload, header.length, data.length);
        return payload;
    }
}
