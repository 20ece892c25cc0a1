package org.stampede;

/**
 * Calls GC handlers on behalf of the native library, which counts a {@code false} return in
 * {@code handlerErrors}. What a handler throws is handed to the current thread's uncaught-exception
 * handler (by default it prints the stack trace) and goes no further.
 */
final class ReclaimDispatch {
    private ReclaimDispatch() {}

    static boolean channel(ReclaimHandler handler, long ts) {
        try {
            handler.reclaimed(ts);
            return true;
        } catch (Throwable thrown) {
            report(thrown);
            return false;
        }
    }

    static boolean runtime(RuntimeReclaimHandler handler, String name, long ts) {
        try {
            handler.reclaimed(name, ts);
            return true;
        } catch (Throwable thrown) {
            report(thrown);
            return false;
        }
    }

    private static void report(Throwable thrown) {
        try {
            Thread thread = Thread.currentThread();
            thread.getUncaughtExceptionHandler().uncaughtException(thread, thrown);
        } catch (Throwable ignored) {
            // The report itself failed: the count in handlerErrors still tells.
        }
    }
}
