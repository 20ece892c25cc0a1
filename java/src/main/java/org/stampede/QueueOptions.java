package org.stampede;

/**
 * How a queue is created ({@link Runtime#createQueue(String, QueueOptions)}): its bounds, a
 * description and the node. Immutable: each {@code with...} returns a new value.
 */
public final class QueueOptions {
    /** Unbounded, no description, this runtime's node. */
    public static final QueueOptions DEFAULT = new QueueOptions(-1, -1, null, null);

    final long capacity;
    final long maxBytes;
    final String description;
    final String node;

    private QueueOptions(long capacity, long maxBytes, String description, String node) {
        this.capacity = capacity;
        this.maxBytes = maxBytes;
        this.description = description;
        this.node = node;
    }

    /** At most {@code items} items waiting or open at once. */
    public QueueOptions withCapacity(long items) {
        return new QueueOptions(items, maxBytes, description, node);
    }

    /** At most {@code bytes} payload bytes at once. */
    public QueueOptions withMaxBytes(long bytes) {
        return new QueueOptions(capacity, bytes, description, node);
    }

    /** What the queue carries, for people. */
    public QueueOptions withDescription(String description) {
        return new QueueOptions(capacity, maxBytes, description, node);
    }

    /** The node to place it on: null or this runtime's own node. */
    public QueueOptions withNode(String node) {
        return new QueueOptions(capacity, maxBytes, description, node);
    }
}
