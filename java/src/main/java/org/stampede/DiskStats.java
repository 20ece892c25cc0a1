package org.stampede;

/**
 * What a channel's disk tier holds now.
 *
 * @param items items on disk
 * @param bytes payload bytes on disk
 * @param extents extent files in use
 * @param written items written to disk so far
 * @param recovered items recovered from disk when the channel was created
 */
public record DiskStats(long items, long bytes, long extents, long written, long recovered) {
    static DiskStats of(long[] v) {
        return v == null ? null : new DiskStats(v[0], v[1], v[2], v[3], v[4]);
    }
}
