package org.stampede;

/**
 * Codec names (docs/SEMANTICS.md, "Payloads and codecs"): how an item's bytes are to be read. The
 * standard ones are understood by every client; any other name is carried through untouched (at
 * most 256 bytes).
 */
public final class Codec {
    /** Opaque bytes (the default of byte puts). */
    public static final String RAW = "raw";
    /** UTF-8 text (the default of {@code String} puts). */
    public static final String UTF8 = "utf8";
    /** A JSON document in UTF-8. */
    public static final String JSON = "json";
    /** NumPy's {@code .npy} format: a header with dtype and shape, then the data ({@link Npy}). */
    public static final String NPY = "npy";

    private Codec() {}

    // The native encoding: standard codecs by number (no string crosses JNI), others by name.
    static final int OTHER = 0;

    static int kind(String codec) {
        switch (codec) {
            case RAW:
                return 1;
            case UTF8:
                return 2;
            case JSON:
                return 3;
            case NPY:
                return 4;
            default:
                return OTHER;
        }
    }

    static String name(int kind, String other) {
        switch (kind) {
            case 1:
                return RAW;
            case 2:
                return UTF8;
            case 3:
                return JSON;
            case 4:
                return NPY;
            default:
                return other;
        }
    }
}
