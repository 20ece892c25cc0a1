package org.stampede;

import java.nio.file.Path;
import java.util.List;

/**
 * How a channel is created ({@link Runtime#createChannel(String, ChannelOptions)}): its bounds, its
 * retention, the codec its payloads must have, a description, the node, and an optional disk tier.
 * Immutable: each {@code with...} returns a new value.
 *
 * <pre>{@code
 * rt.createChannel("camera/left", ChannelOptions.DEFAULT.withCapacity(30).withCodec(Codec.NPY));
 * }</pre>
 */
public final class ChannelOptions {
    /** Unbounded, {@link Retention#HISTORY}, any codec, no description, this runtime's node, memory only. */
    public static final ChannelOptions DEFAULT = new ChannelOptions(-1, -1, Retention.HISTORY, null, null, null, null,
            -1, -1);

    final long capacity;
    final long maxBytes;
    final Retention retention;
    final String codec;
    final String description;
    final String node;
    final List<Path> diskDirs;
    final long diskExtentBytes;
    final long diskMemoryItems;

    private ChannelOptions(long capacity, long maxBytes, Retention retention, String codec, String description,
            String node, List<Path> diskDirs, long diskExtentBytes, long diskMemoryItems) {
        this.capacity = capacity;
        this.maxBytes = maxBytes;
        this.retention = retention;
        this.codec = codec;
        this.description = description;
        this.node = node;
        this.diskDirs = diskDirs;
        this.diskExtentBytes = diskExtentBytes;
        this.diskMemoryItems = diskMemoryItems;
    }

    /** At most {@code items} items stored at once (a full channel makes puts wait or fail {@code Full}). */
    public ChannelOptions withCapacity(long items) {
        return new ChannelOptions(items, maxBytes, retention, codec, description, node, diskDirs, diskExtentBytes,
                diskMemoryItems);
    }

    /** At most {@code bytes} payload bytes stored at once. */
    public ChannelOptions withMaxBytes(long bytes) {
        return new ChannelOptions(capacity, bytes, retention, codec, description, node, diskDirs, diskExtentBytes,
                diskMemoryItems);
    }

    /** When items above ts_min may be reclaimed. */
    public ChannelOptions withRetention(Retention retention) {
        return new ChannelOptions(capacity, maxBytes, retention, codec, description, node, diskDirs,
                diskExtentBytes, diskMemoryItems);
    }

    /** The codec every payload must have (a put of another is {@code InvalidArgument}); null: any. */
    public ChannelOptions withCodec(String codec) {
        return new ChannelOptions(capacity, maxBytes, retention, codec, description, node, diskDirs,
                diskExtentBytes, diskMemoryItems);
    }

    /** What the channel carries, for people ({@link Channel#info()}). */
    public ChannelOptions withDescription(String description) {
        return new ChannelOptions(capacity, maxBytes, retention, codec, description, node, diskDirs,
                diskExtentBytes, diskMemoryItems);
    }

    /** The node to place it on: null or this runtime's own node (a task cannot span nodes yet). */
    public ChannelOptions withNode(String node) {
        return new ChannelOptions(capacity, maxBytes, retention, codec, description, node, diskDirs,
                diskExtentBytes, diskMemoryItems);
    }

    /**
     * Keeps history beyond memory in a disk tier striped over {@code dirs} (one per disk; embedded
     * runtimes only; docs/RECORDING.md). {@code extentBytes} and {@code memoryItems}: -1 for the defaults.
     */
    public ChannelOptions withDisk(List<Path> dirs, long extentBytes, long memoryItems) {
        return new ChannelOptions(capacity, maxBytes, retention, codec, description, node,
                dirs == null ? null : List.copyOf(dirs), extentBytes, memoryItems);
    }
}
