package org.stampede;

import java.nio.file.Path;
import java.time.Duration;

/**
 * Entry points and constants: {@link #connect} opens a session on a node elsewhere (its
 * {@link Runtime} has the embedded API); {@code new Runtime()} runs one in this process.
 */
public final class Stampede {
    /** The virtual time of a task that never puts on its own: it inherits timestamps from what it gets. */
    public static final long INFINITY = Long.MAX_VALUE;
    /** The highest timestamp an item may carry: items live at {@code 0 ..= TS_MAX}. */
    public static final long TS_MAX = Long.MAX_VALUE - 1;

    private Stampede() {}

    /**
     * Connects to the node listening on {@code endpoint} ({@code tcp/127.0.0.1:7447},
     * {@code tls/<host>:<port>}, {@code unixsock-stream/<path>}) and opens a session there: the
     * runtime's channels, queues and tasks live on that node. {@code timeout}: how long to keep trying
     * (null: as long as it takes).
     *
     * @throws UnreachableException no node answered in time
     * @throws InvalidArgumentException a malformed endpoint, or a node of another release
     */
    public static Runtime connect(String endpoint, Duration timeout) throws StampedeException {
        return connect(endpoint, ConnectOptions.DEFAULT.withTimeout(timeout));
    }

    /**
     * {@link #connect(String, Duration)} with a node, a user, TLS files or the client's prefetch
     * default ({@link ConnectOptions}).
     */
    public static Runtime connect(String endpoint, ConnectOptions options) throws StampedeException {
        Errors.require(endpoint, "connect", "endpoint", "the endpoint");
        ConnectOptions o = options == null ? ConnectOptions.DEFAULT : options;
        long handle = Native.connect(endpoint, Native.nanos(o.timeout, "connect", endpoint), o.node, o.user,
                o.password, path(o.rootCa), path(o.certificate), path(o.privateKey),
                o.prefetch == null ? null : o.prefetch.wireName());
        return new Runtime(handle);
    }

    private static String path(Path path) {
        return path == null ? null : path.toString();
    }

    /** How many native objects the Java side holds now (a diagnostic: it falls as objects are collected). */
    public static long nativeHandles() {
        return Native.handleCount();
    }
}
