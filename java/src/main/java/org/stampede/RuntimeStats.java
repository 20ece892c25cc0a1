package org.stampede;

/**
 * Node-wide counters.
 *
 * @param tsMin the current ts_min
 * @param containers channels and queues registered
 * @param claims claims on ts_min held (tasks, and containers with unconsumed items)
 * @param handlerErrors exceptions thrown by this runtime's GC handlers so far
 */
public record RuntimeStats(long tsMin, long containers, long claims, long handlerErrors) {
    static RuntimeStats of(long[] v) {
        return new RuntimeStats(v[0], v[1], v[2], v[3]);
    }
}
