package org.stampede;

import java.lang.ref.Reference;
import java.util.Optional;

/**
 * The unit that holds a virtual time (the papers' thread; docs/SEMANTICS.md, "Terms" and
 * "Virtual time, visibility, GC"). Any thread may drive it; the runtime tracks tasks, not threads.
 * Thread-safe.
 *
 * <p>{@link #close()} ends the task: its connections detach and its claim on ts_min goes, so a task
 * that ends never pins GC. A task that is never closed lives until its object and every connection
 * it attached are unreachable (then it ends as if closed).
 */
public final class Task implements AutoCloseable {
    final long handle;

    Task(long handle) {
        this.handle = handle;
        Native.own(this, handle);
    }

    /** The task's id, unique within its runtime. */
    public long id() {
        try {
            return Native.taskId(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The task's virtual time. */
    public long virtualTime() {
        try {
            return Native.taskVirtualTime(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * {@code min(virtualTime, timestamps of items open on its input connections)}: the lowest timestamp
     * this task may still put.
     */
    public long visibility() {
        try {
            return Native.taskVisibility(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Sets the virtual time; it must be at or above the visibility ({@code BelowVisibility}
     * otherwise). Advancing it may advance ts_min and reclaim items before this returns.
     */
    public void setVirtualTime(long virtualTime) throws StampedeException {
        try {
            Native.taskSetVirtualTime(handle, virtualTime);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** A child task whose virtual time must be at or above this task's visibility. */
    public Task spawn(long virtualTime) throws StampedeException {
        try {
            return new Task(Native.taskSpawn(handle, virtualTime));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Labels the task for tools (graph, dashboards, traces). */
    public void setName(String name) throws StampedeException {
        Errors.require(name, "set_name", "task", "the name");
        try {
            Native.taskSetName(handle, name);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The task's label, if it has one. */
    public Optional<String> name() {
        try {
            return Optional.ofNullable(Native.taskName(handle));
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Attaches an input connection to a channel. Every item present below this task's visibility is
     * consumed on it at once; the rest, and every item put later, are unseen on it.
     */
    public ChannelInput attachInput(Channel channel) throws StampedeException {
        return attachInput(channel, InputOptions.DEFAULT);
    }

    /**
     * Attaches an input connection to a channel with a bound on how far it may fall behind
     * ({@link InputOptions}): beyond it the oldest unseen items are consumed for it and counted as
     * skipped, so a slow reader cannot hold ts_min back.
     */
    public ChannelInput attachInput(Channel channel, InputOptions options) throws StampedeException {
        Errors.require(channel, "attach_input", "task", "the channel");
        InputOptions o = options == null ? InputOptions.DEFAULT : options;
        String prefetch = o.prefetch == null ? null : o.prefetch.wireName();
        return new ChannelInput(attach(channel.handle, true, o.maxLagItems, o.maxLagTs, prefetch, 0), channel);
    }

    /** Attaches an output connection to a channel. */
    public ChannelOutput attachOutput(Channel channel) throws StampedeException {
        return attachOutput(channel, 0);
    }

    /**
     * Attaches an output connection to a channel with a put window: through a node, up to
     * {@code putWindow} puts are sent without waiting for their replies, and a put's error is thrown by
     * the connection's next put or {@link ChannelOutput#flush()} (docs/NODES.md, "Pipelined puts"). 0:
     * every put waits. {@code InvalidArgument} when negative or above 64 ({@code PUT_WINDOW_MAX}).
     */
    public ChannelOutput attachOutput(Channel channel, int putWindow) throws StampedeException {
        Errors.require(channel, "attach_output", "task", "the channel");
        return new ChannelOutput(attach(channel.handle, false, -1, -1, null, putWindow), channel);
    }

    /** Attaches an input connection to a queue. */
    public QueueInput attachInput(Queue queue) throws StampedeException {
        Errors.require(queue, "attach_input", "task", "the queue");
        return new QueueInput(attach(queue.handle, true, -1, -1, null, 0), queue);
    }

    /** Attaches an output connection to a queue. */
    public QueueOutput attachOutput(Queue queue) throws StampedeException {
        Errors.require(queue, "attach_output", "task", "the queue");
        return new QueueOutput(attach(queue.handle, false, -1, -1, null, 0), queue);
    }

    private long attach(long container, boolean input, long maxLagItems, long maxLagTs, String prefetch,
            long putWindow) throws StampedeException {
        try {
            return Native.taskAttach(handle, container, input, maxLagItems, maxLagTs, prefetch, putWindow);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Ends the task now: its connections detach (later use fails {@code Closed}), its claim goes. */
    @Override
    public void close() {
        try {
            Native.taskClose(handle);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    @Override
    public String toString() {
        return "Task(" + id() + ")";
    }
}
