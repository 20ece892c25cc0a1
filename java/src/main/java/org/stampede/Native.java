package org.stampede;

import java.io.File;
import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.time.Duration;

/**
 * The native half ({@code crates/stampede-jni}, {@code libstampede_jni.so}): loading it, and its
 * static native methods. Package-private: the public classes are the API.
 *
 * <h2>Where the library is found</h2>
 * <ol>
 *   <li>The system property {@code stampede.library.path}: the library file itself, or the directory
 *       holding it ({@code -Dstampede.library.path=target/debug} after {@code cargo build -p
 *       stampede-jni}). The Maven build sets it for the tests.</li>
 *   <li>Otherwise {@code System.loadLibrary("stampede_jni")}: a directory of
 *       {@code java.library.path} (or {@code LD_LIBRARY_PATH}).</li>
 * </ol>
 * The library and these classes must speak the same contract ({@link #ABI_VERSION}); a mismatch is
 * an {@link UnsatisfiedLinkError} saying so, as is a library not found (naming where it looked).
 *
 * <h2>Encodings</h2>
 * Handles are {@code long} ids of native objects (never pointers: a stale id is
 * {@link ClosedException}, not a crash); each is released exactly once, by {@link #own}'s cleaner
 * (an item's by its last holder, see {@link Item}).
 * Timeouts are nanoseconds, negative = wait forever ({@link #nanos}). Counts and bounds use -1 for
 * "none". Codecs travel as a kind ({@link Codec#kind}) plus a name for other codecs.
 */
final class Native {
    /** The contract version; {@code crates/stampede-jni/src/lib.rs} has the same number. */
    static final int ABI_VERSION = 1;

    /** Releases native objects once their Java owners are unreachable. */
    static final Cleaner CLEANER = Cleaner.create();

    static {
        load();
    }

    private Native() {}

    private static void load() {
        String path = System.getProperty("stampede.library.path");
        if (path != null && !path.isEmpty()) {
            File file = new File(path);
            if (file.isDirectory()) {
                file = new File(file, System.mapLibraryName("stampede_jni"));
            }
            if (!file.isFile()) {
                throw new UnsatisfiedLinkError("stampede: no native library at " + file.getAbsolutePath()
                        + " (system property stampede.library.path=" + path
                        + "); build it with `cargo build -p stampede-jni`, or point the property at it");
            }
            System.load(file.getAbsolutePath());
        } else {
            try {
                System.loadLibrary("stampede_jni");
            } catch (UnsatisfiedLinkError e) {
                UnsatisfiedLinkError missing = new UnsatisfiedLinkError("stampede: "
                        + System.mapLibraryName("stampede_jni") + " is not on java.library.path="
                        + System.getProperty("java.library.path")
                        + "; build it with `cargo build -p stampede-jni` and run with"
                        + " -Dstampede.library.path=<its directory, e.g. target/debug>");
                missing.initCause(e);
                throw missing;
            }
        }
        int abi = abiVersion();
        if (abi != ABI_VERSION) {
            throw new UnsatisfiedLinkError("stampede: the native library speaks contract version " + abi
                    + " but these classes speak " + ABI_VERSION + "; rebuild both from one checkout");
        }
    }

    /** Releases {@code handle} when {@code owner} becomes unreachable (or the cleanable is cleaned). */
    static Cleaner.Cleanable own(Object owner, long handle) {
        return CLEANER.register(owner, new Release(handle));
    }

    /** The cleaning action of one handle: must not refer to its owner. */
    private static final class Release implements Runnable {
        private final long handle;

        Release(long handle) {
            this.handle = handle;
        }

        @Override
        public void run() {
            release(handle);
        }
    }

    /** A timeout in nanoseconds for the native side: null waits forever (-1), zero never waits. */
    static long nanos(Duration timeout, String op, String name) throws InvalidArgumentException {
        if (timeout == null) {
            return -1;
        }
        if (timeout.isNegative()) {
            throw Errors.invalid(op, name, "a timeout is zero or more (null waits forever), not " + timeout);
        }
        try {
            return timeout.toNanos();
        } catch (ArithmeticException tooLong) {
            return -1; // over 292 years: forever
        }
    }

    // ---- the library --------------------------------------------------------------------------

    static native int abiVersion();

    static native void release(long handle);

    static native long handleCount();

    /** Panics in the native library (for the tests: it must arrive as an IllegalStateException). */
    static native void panicForTests();

    // ---- runtime ------------------------------------------------------------------------------

    static native long runtimeNew();

    static native long connect(String endpoint, long timeoutNanos, String node, String user, String password,
            String rootCa, String certificate, String privateKey, String prefetch) throws StampedeException;

    static native String runtimeNode(long runtime);

    static native long runtimeCreateChannel(long runtime, String name, long capacity, long maxBytes, int retention,
            int codecKind, String codecName, String description, String node, String[] diskDirs, long extentBytes,
            long memoryItems) throws StampedeException;

    static native long runtimeCreateQueue(long runtime, String name, long capacity, long maxBytes,
            String description, String node) throws StampedeException;

    static native long runtimeLookup(long runtime, String name) throws StampedeException;

    static native String[] runtimeNames(long runtime, String prefix) throws StampedeException;

    static native String[] runtimeNodes(long runtime) throws StampedeException;

    static native long runtimeTask(long runtime, long virtualTime) throws StampedeException;

    static native long runtimeTsMin(long runtime);

    static native long runtimeCollect(long runtime);

    static native void runtimeOnReclaim(long runtime, RuntimeReclaimHandler handler) throws StampedeException;

    static native long[] runtimeStats(long runtime);

    static native String runtimeGraph(long runtime) throws StampedeException;

    static native void runtimeClose(long runtime);

    static native boolean runtimeIsClosed(long runtime);

    static native long runtimeWatch(long runtime, String prefix, long timeoutNanos) throws StampedeException;

    static native String[] watchNext(long watch, long timeoutNanos) throws StampedeException;

    // ---- channels and queues ------------------------------------------------------------------

    static native boolean containerIsQueue(long container);

    static native String containerName(long container);

    static native long containerId(long container);

    static native long[] containerLimits(long container);

    static native long[] containerStats(long container);

    static native String[] containerInfo(long container);

    static native void containerDestroy(long container) throws StampedeException;

    static native void containerOnReclaim(long container, ReclaimHandler handler) throws StampedeException;

    static native boolean containerEquals(long a, long b);

    static native long[] channelTimestamps(long channel) throws StampedeException;

    static native int channelRetention(long channel);

    static native long channelSettledBelow(long channel);

    static native void channelCloseProducers(long channel) throws StampedeException;

    static native boolean channelProducersClosed(long channel);

    static native long[] channelDiskStats(long channel);

    // ---- tasks --------------------------------------------------------------------------------

    static native long taskId(long task);

    static native long taskVirtualTime(long task);

    static native long taskVisibility(long task);

    static native void taskSetVirtualTime(long task, long virtualTime) throws StampedeException;

    static native long taskSpawn(long task, long virtualTime) throws StampedeException;

    static native void taskSetName(long task, String name) throws StampedeException;

    static native String taskName(long task);

    static native void taskClose(long task);

    static native long taskAttach(long task, long container, boolean input, long maxLagItems, long maxLagTs,
            String prefetch, long putWindow) throws StampedeException;

    // ---- connections --------------------------------------------------------------------------

    static native void putArray(long output, long ts, byte[] data, int offset, int length, int codecKind,
            String codecName, long refcount, long timeoutNanos) throws StampedeException;

    static native void putDirect(long output, long ts, ByteBuffer data, int offset, int length, int codecKind,
            String codecName, long refcount, long timeoutNanos) throws StampedeException;

    static native void putItem(long output, long ts, long item, int codecKind, String codecName, long refcount,
            long timeoutNanos) throws StampedeException;

    static native long outputDemand(long output) throws StampedeException;

    static native void outputFlush(long output) throws StampedeException;

    static native void detach(long connection);

    static native Item channelGet(long input, int selectorKind, long ts, long timeoutNanos)
            throws StampedeException;

    static native Item[] channelGetRange(long input, long t0, long t1) throws StampedeException;

    static native void channelConsume(long input, long ts) throws StampedeException;

    static native void channelConsumeUntil(long input, long ts) throws StampedeException;

    static native Item queueGet(long input, long timeoutNanos) throws StampedeException;

    static native void queueConsume(long input, long seq, long ts) throws StampedeException;

    // ---- items and .npy -----------------------------------------------------------------------

    static native ByteBuffer itemBuffer(long item) throws StampedeException;

    static native byte[] itemCopy(long item) throws StampedeException;

    static native NpyHeader itemNpy(long item, long ts) throws StampedeException;

    static native NpyHeader npyHeaderArray(byte[] data, int offset, int length) throws StampedeException;

    static native NpyHeader npyHeaderDirect(ByteBuffer data, int offset, int length) throws StampedeException;

    static native byte[] npyEncodeHeader(String descr, long[] shape) throws StampedeException;

    static native long bufferAddress(ByteBuffer buffer) throws StampedeException;
}
