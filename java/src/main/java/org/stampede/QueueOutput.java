package org.stampede;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;

/**
 * A task's output connection to a queue: puts append in FIFO order (duplicate timestamps allowed).
 * A reference count is refused ({@code InvalidArgument}): a queue item goes to exactly one getter.
 * Thread-safe.
 *
 * <p>Every put copies the data once (the caller may reuse its array or buffer when put returns), except
 * {@link #put(long, Item, PutOptions)}, which shares the item's bytes. Do not change an array or buffer
 * from another thread while a put reads it. Without options a put waits as long as needed for room.
 */
public final class QueueOutput extends Connection {
    private final Queue queue;

    QueueOutput(long handle, Queue queue) {
        super(handle);
        this.queue = queue;
    }

    /** The queue this connection puts into. */
    public Queue queue() {
        return queue;
    }

    @Override
    public String name() {
        return queue.name();
    }

    /** Puts the bytes of {@code data} at {@code ts}, codec {@code raw}. */
    public void put(long ts, byte[] data) throws StampedeException {
        Output.put(this, ts, data, 0, data == null ? 0 : data.length, PutOptions.DEFAULT, Codec.RAW);
    }

    /** Puts the bytes of {@code data} at {@code ts} (codec {@code raw} unless the options say). */
    public void put(long ts, byte[] data, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, 0, data == null ? 0 : data.length, options, Codec.RAW);
    }

    /** Puts {@code length} bytes of {@code data} from {@code offset} at {@code ts}. */
    public void put(long ts, byte[] data, int offset, int length, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, offset, length, options, Codec.RAW);
    }

    /**
     * Puts the remaining bytes of {@code data} (position to limit; the position does not move). A direct
     * buffer, or an {@link Item#data()} view, is copied straight from its memory.
     */
    public void put(long ts, ByteBuffer data) throws StampedeException {
        Output.put(this, ts, data, PutOptions.DEFAULT);
    }

    /** {@link #put(long, ByteBuffer)} with options. */
    public void put(long ts, ByteBuffer data, PutOptions options) throws StampedeException {
        Output.put(this, ts, data, options);
    }

    /** Puts {@code text} encoded in UTF-8, codec {@code utf8}. */
    public void put(long ts, String text) throws StampedeException {
        Output.put(this, ts, text, PutOptions.DEFAULT);
    }

    /** {@link #put(long, String)} with options (e.g. codec {@code json}). */
    public void put(long ts, String text, PutOptions options) throws StampedeException {
        Output.put(this, ts, text, options);
    }

    /** Puts another item's bytes and codec at {@code ts} without copying them (items are immutable). */
    public void put(long ts, Item item) throws StampedeException {
        Output.put(this, ts, item, PutOptions.DEFAULT);
    }

    /** {@link #put(long, Item)} with options (a codec given there replaces the item's). */
    public void put(long ts, Item item, PutOptions options) throws StampedeException {
        Output.put(this, ts, item, options);
    }
}
