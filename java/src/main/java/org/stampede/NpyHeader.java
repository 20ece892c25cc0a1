package org.stampede;

import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * What a {@code .npy} header says (docs/SEMANTICS.md, "npy payloads"; NumPy's format), as
 * {@code stampede::npy} reads it: the parser every client shares, bounded and safe on hostile
 * input. Immutable.
 */
public final class NpyHeader {
    private final String descr;
    private final boolean fortranOrder;
    private final long[] shape;
    private final long itemSize;
    private final boolean hasObject;
    private final long dataOffset;
    private final long dataBytes;
    private final int versionMajor;
    private final int versionMinor;

    /** Called by the native library. */
    NpyHeader(String descr, boolean fortranOrder, long[] shape, long itemSize, boolean hasObject, long dataOffset,
            long dataBytes, int versionMajor, int versionMinor) {
        this.descr = descr;
        this.fortranOrder = fortranOrder;
        this.shape = shape.clone();
        this.itemSize = itemSize;
        this.hasObject = hasObject;
        this.dataOffset = dataOffset;
        this.dataBytes = dataBytes;
        this.versionMajor = versionMajor;
        this.versionMinor = versionMinor;
    }

    /**
     * The dtype: for a plain type the string NumPy's {@code dtype.str} writes ({@code |u1}, {@code <f4},
     * {@code <M8[ns]}); for a structured dtype the header's Python literal ({@code [('x', '<f4')]}).
     */
    public String descr() {
        return descr;
    }

    /** {@code true} if the data is in Fortran (column-major) order. */
    public boolean fortranOrder() {
        return fortranOrder;
    }

    /** The array's shape (empty for a scalar). */
    public long[] shape() {
        return shape.clone();
    }

    /** The shape as the vectors write it: {@code 240x320}, {@code 7}, or {@code scalar}. */
    public String shapeText() {
        if (shape.length == 0) {
            return "scalar";
        }
        StringBuilder text = new StringBuilder();
        for (long d : shape) {
            text.append(text.length() == 0 ? "" : "x").append(d);
        }
        return text.toString();
    }

    /** The number of elements: the product of the shape. */
    public long elements() {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    /** Bytes per element. */
    public long itemSize() {
        return itemSize;
    }

    /** {@code true} if the dtype holds Python objects (such payloads are refused by puts). */
    public boolean hasObject() {
        return hasObject;
    }

    /** Where the data starts: the length of the header. */
    public long dataOffset() {
        return dataOffset;
    }

    /** How many data bytes the header says follow it (elements × item size). */
    public long dataBytes() {
        return dataBytes;
    }

    /** The format version, {@code 1.0}, {@code 2.0} or {@code 3.0}. */
    public String version() {
        return versionMajor + "." + versionMinor;
    }

    /** The byte order of the data: little-endian for {@code <}, big-endian for {@code >}, else native. */
    public ByteOrder byteOrder() {
        return Item.orderOf(descr);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof NpyHeader h && h.descr.equals(descr) && h.fortranOrder == fortranOrder
                && Arrays.equals(h.shape, shape) && h.itemSize == itemSize && h.hasObject == hasObject
                && h.dataOffset == dataOffset && h.dataBytes == dataBytes && h.versionMajor == versionMajor
                && h.versionMinor == versionMinor;
    }

    @Override
    public int hashCode() {
        return descr.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return "NpyHeader(descr=" + descr + ", shape=" + shapeText() + (fortranOrder ? ", fortran" : "") + ")";
    }
}
