package org.stampede;

import java.lang.ref.Reference;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A Stampede runtime: embedded in this process ({@code new Runtime()}; nothing to install or start)
 * or a session on a node elsewhere ({@link Stampede#connect}), with one API. Several may coexist;
 * they share nothing. Thread-safe.
 *
 * <pre>{@code
 * try (Runtime rt = new Runtime()) {
 *     Channel frames = rt.createChannel("camera/frames");
 *     try (Task camera = rt.task(0); Task tracker = rt.task(Stampede.INFINITY);
 *          ChannelOutput out = camera.attachOutput(frames); ChannelInput in = tracker.attachInput(frames)) {
 *         for (long ts = 0; ts < 10; ts++) {
 *             out.put(ts, ("frame " + ts).getBytes());
 *             camera.setVirtualTime(ts + 1);
 *         }
 *         try (Item item = in.get(Selector.NEWEST_UNSEEN)) {    // the freshest frame, skipping the rest
 *             in.consumeUntil(item.ts());                      // frames 0..9 are garbage to the tracker
 *         }
 *         System.out.println(rt.tsMin() + " " + frames.stats().liveItems());   // 10 0
 *     }
 * }
 * }</pre>
 *
 * <p>{@link #close()} ends the runtime (embedded: every channel and queue is destroyed, blocked calls
 * wake with {@code Closed}) or the session (client: its tasks on the node are closed). The Java object
 * and the native memory behind it are released when it is no longer reachable.
 */
public final class Runtime implements AutoCloseable {
    final long handle;

    /** A new, empty runtime embedded in this process. */
    public Runtime() {
        this(Native.runtimeNew());
    }

    Runtime(long handle) {
        this.handle = handle;
        Native.own(this, handle);
    }

    /** The node this runtime is a session on; empty when embedded. */
    public Optional<String> node() {
        try {
            return Optional.ofNullable(Native.runtimeNode(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Creates an unbounded channel ({@link #createChannel(String, ChannelOptions)}). */
    public Channel createChannel(String name) throws StampedeException {
        return createChannel(name, ChannelOptions.DEFAULT);
    }

    /**
     * Creates a channel. Names are {@code /}-separated non-empty segments of letters, digits and
     * {@code _ - . :}; a bad name or a zero bound is {@code InvalidArgument}, a name in use
     * {@code AlreadyExists}, a closed runtime {@code Closed}.
     */
    public Channel createChannel(String name, ChannelOptions options) throws StampedeException {
        Errors.require(name, "create_channel", "runtime", "the name");
        ChannelOptions o = options == null ? ChannelOptions.DEFAULT : options;
        String[] dirs = null;
        if (o.diskDirs != null) {
            dirs = o.diskDirs.stream().map(Path::toString).toArray(String[]::new);
        }
        try {
            long channel = Native.runtimeCreateChannel(handle, name, o.capacity, o.maxBytes,
                    o.retention == Retention.CURRENT_READERS ? 1 : 0, o.codec == null ? -1 : Codec.kind(o.codec),
                    o.codec, o.description, o.node, dirs, o.diskExtentBytes, o.diskMemoryItems);
            return new Channel(channel);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Creates an unbounded queue. */
    public Queue createQueue(String name) throws StampedeException {
        return createQueue(name, QueueOptions.DEFAULT);
    }

    /** Creates a queue (names, bounds and errors as {@link #createChannel(String, ChannelOptions)}). */
    public Queue createQueue(String name, QueueOptions options) throws StampedeException {
        Errors.require(name, "create_queue", "runtime", "the name");
        QueueOptions o = options == null ? QueueOptions.DEFAULT : options;
        try {
            return new Queue(Native.runtimeCreateQueue(handle, name, o.capacity, o.maxBytes, o.description, o.node));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The channel or queue called {@code name} ({@code NotFound} otherwise). */
    public Container lookup(String name) throws StampedeException {
        Errors.require(name, "lookup", "runtime", "the name");
        try {
            long container = Native.runtimeLookup(handle, name);
            return Native.containerIsQueue(container) ? new Queue(container) : new Channel(container);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The channel called {@code name} ({@code NotFound} if there is none, or it is a queue). */
    public Channel channel(String name) throws StampedeException {
        if (lookup(name) instanceof Channel channel) {
            return channel;
        }
        throw Errors.notFound(name + " (a queue, not a channel)");
    }

    /** The queue called {@code name} ({@code NotFound} if there is none, or it is a channel). */
    public Queue queue(String name) throws StampedeException {
        if (lookup(name) instanceof Queue queue) {
            return queue;
        }
        throw Errors.notFound(name + " (a channel, not a queue)");
    }

    /** Every channel and queue name, sorted. */
    public List<String> names() throws StampedeException {
        return names("");
    }

    /**
     * Names under {@code prefix}, sorted. Hierarchical: {@code "camera/"} selects {@code camera/left}
     * (not {@code cameras}); {@code "camera"} selects {@code camera} itself and the names under it.
     */
    public List<String> names(String prefix) throws StampedeException {
        Errors.require(prefix, "names", "runtime", "the prefix");
        try {
            return List.of(Native.runtimeNames(handle, prefix));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The nodes this runtime reaches on the fabric, sorted (empty when embedded). */
    public List<String> nodes() throws StampedeException {
        try {
            return List.of(Native.runtimeNodes(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * A root task at {@code virtualTime} ({@link Stampede#INFINITY} allowed). It must be at or above
     * ts_min ({@code BelowVisibility} otherwise): nothing below ts_min may ever be put again.
     */
    public Task task(long virtualTime) throws StampedeException {
        try {
            return new Task(Native.runtimeTask(handle, virtualTime));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * The current ts_min: no existing or future task can get an item below it ({@link Stampede#INFINITY}
     * when nothing holds it back). Remotely, the node's; the last seen when it cannot be reached.
     */
    public long tsMin() {
        try {
            return Native.runtimeTsMin(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Runs a GC pass now; returns the number of items reclaimed. Reclamation already happens within the
     * operation that makes an item garbage, so this is for deterministic tests and tools.
     */
    public long collect() {
        try {
            return Native.runtimeCollect(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Sets (or, with null, removes) the GC handler of every channel and queue, replacing the previous
     * one ({@link RuntimeReclaimHandler} says where and when it runs). Through a client it runs on the
     * client, for items reclaimed on the node.
     */
    public void onReclaim(RuntimeReclaimHandler handler) throws StampedeException {
        try {
            Native.runtimeOnReclaim(handle, handler);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Node-wide counters. */
    public RuntimeStats stats() {
        try {
            return RuntimeStats.of(Native.runtimeStats(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * What the runtime holds now, as JSON: node, ts_min, tasks with their connections, channels and
     * queues with their counters (the dashboard's snapshot format, docs/DASHBOARD.md).
     */
    public String graphJson() throws StampedeException {
        try {
            return Native.runtimeGraph(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Watches the names under {@code prefix}: a {@code created} event for each channel and queue there
     * now, then one per creation and destruction, and through a client nodes up and down.
     * {@link Watch#next()} returns empty when nothing happens for {@code timeout} (null: never).
     */
    public Watch watch(String prefix, Duration timeout) throws StampedeException {
        Errors.require(prefix, "watch", "runtime", "the prefix");
        long nanos = Native.nanos(timeout, "watch", prefix);
        try {
            return new Watch(Native.runtimeWatch(handle, prefix, nanos), nanos);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** {@code true} once {@link #close()} ran. */
    public boolean isClosed() {
        try {
            return Native.runtimeIsClosed(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Ends the runtime (embedded: every channel and queue destroyed, blocked calls woken with
     * {@code Closed}, every task closed) or this client's session; drops the GC handlers. Idempotent.
     */
    @Override
    public void close() {
        try {
            Native.runtimeClose(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    @Override
    public String toString() {
        return node().map(n -> "Runtime(node=\"" + n + "\")").orElse("Runtime(embedded)");
    }
}
