package org.stampede;

import java.util.OptionalLong;

/**
 * A snapshot of a channel's or queue's counters (reclamation is observable: docs/SEMANTICS.md,
 * "Virtual time, visibility, GC").
 *
 * @param liveItems items stored now
 * @param liveBytes payload bytes stored now
 * @param reclaimed items reclaimed so far (by ts_min, by reference count, or consumed from a queue)
 * @param puts items accepted by put so far
 * @param gets successful gets so far
 * @param inputs input connections attached now
 * @param outputs output connections attached now
 * @param tombstones timestamps reclaimed early by reference count, remembered to refuse duplicates
 * @param tombstoneRuns runs of consecutive tombstones (what they cost in memory)
 * @param claim the container's lowest claim on ts_min, if any
 * @param tsMin the runtime's ts_min when the snapshot was taken
 * @param handlerErrors exceptions thrown by this container's GC handler so far
 */
public record Stats(long liveItems, long liveBytes, long reclaimed, long puts, long gets, long inputs, long outputs,
        long tombstones, long tombstoneRuns, OptionalLong claim, long tsMin, long handlerErrors) {

    static Stats of(long[] v) {
        return new Stats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                v[9] < 0 ? OptionalLong.empty() : OptionalLong.of(v[9]), v[10], v[11]);
    }
}
