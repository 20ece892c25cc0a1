package org.stampede;

/**
 * When a channel may reclaim an item above ts_min (docs/CORRELATION.md,
 * "Demand feedback and the current-readers policy").
 */
public enum Retention {
    /** Late joiners may read the past: an item lives until ts_min passes it (or its refcount is reached). */
    HISTORY,
    /**
     * Only current readers count: an item is reclaimed as soon as every input connection attached now
     * has consumed it (at once if none is attached).
     */
    CURRENT_READERS
}
