package org.stampede;

import java.time.Duration;

/**
 * Options of a put: the codec, a reference count (channels only) and how long to wait for room in a
 * full bounded container. Immutable: each {@code with...} returns a new value.
 *
 * <pre>{@code
 * out.put(ts, frame, PutOptions.DEFAULT.withCodec(Codec.NPY).withTimeout(Duration.ZERO));
 * }</pre>
 */
public final class PutOptions {
    /** The data's own codec, no reference count, wait as long as needed for room. */
    public static final PutOptions DEFAULT = new PutOptions(null, -1, null);

    final String codec;
    final long refcount;
    final Duration timeout;

    private PutOptions(String codec, long refcount, Duration timeout) {
        this.codec = codec;
        this.refcount = refcount;
        this.timeout = timeout;
    }

    /**
     * The codec to store the payload with (null: {@code raw} for bytes, {@code utf8} for text, an item's
     * own). {@code npy} payloads are checked: a malformed header is {@code InvalidArgument}.
     */
    public PutOptions withCodec(String codec) {
        return new PutOptions(codec, refcount, timeout);
    }

    /**
     * How many consumptions make the item garbage, even above ts_min (docs/SEMANTICS.md,
     * "Virtual time, visibility, GC"; channels only; 0 is {@code InvalidArgument}).
     */
    public PutOptions withRefcount(int refcount) {
        return new PutOptions(codec, refcount, timeout);
    }

    /** How long to wait for room: null waits as long as needed, {@link Duration#ZERO} fails {@code Full} at once. */
    public PutOptions withTimeout(Duration timeout) {
        return new PutOptions(codec, refcount, timeout);
    }
}
