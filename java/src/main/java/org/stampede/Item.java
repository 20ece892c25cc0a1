package org.stampede;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An item as a getter sees it: its timestamp, its codec, and its bytes — shared with the channel and
 * every other getter, never copied (copy-out: a read-only, reference-counted view;
 * docs/SEMANTICS.md, "Channels").
 *
 * <h2>Buffers and their lifetime</h2>
 * {@link #data()} returns a read-only <em>direct</em> {@link ByteBuffer} over the item's bytes where
 * the runtime stores them: no copy, whatever the size; every get of the same item sees the same
 * memory; writing through it throws {@link java.nio.ReadOnlyBufferException}. Each call returns a new
 * view (its own position and limit) of the same bytes.
 *
 * <p>The bytes stay valid, unchanged, as long as the {@code Item} is open <em>or</em> any buffer
 * obtained from it is reachable. So touching a buffer after {@link #close()} is safe: it still reads
 * this item's bytes, never freed or recycled memory. What {@code close()} does is give up the item's own
 * hold: with no buffer handed out, the bytes are released at once; with buffers, once the garbage
 * collector finds them unreachable. {@code data()}, {@link #bytes()}, {@link #text()} and
 * {@link #npy()} on a closed item throw {@link ClosedException}; {@link #ts()}, {@link #codec()},
 * {@link #size()} and {@link #seq()} still answer.
 *
 * <p>{@link #dataUntilClose()} is the same view without that guarantee: valid until {@code close()},
 * which then releases the bytes at once (back to the channel's buffer pool) whatever buffers exist —
 * for hot loops over large frames where the buffer provably does not outlive the item.
 *
 * <p>Close items (try-with-resources) so that memory is returned promptly: an item never closed is
 * released when it becomes unreachable. Because the Java heap does not see the native bytes, the
 * library counts the bytes its items and buffers hold and calls {@link System#gc()} when they grow by
 * more than {@code stampede.heldBytesMax} (a system property, default 256 MiB) since the last call, as
 * the JDK does for direct buffers ({@code -XX:+DisableExplicitGC} turns that off).
 *
 * <p>Thread-safe. Getting an item does not consume it: consuming is done on the connection.
 */
public final class Item implements AutoCloseable {
    private static final ByteBuffer EMPTY = ByteBuffer.allocateDirect(0).asReadOnlyBuffer();

    private final long ts;
    private final long seq;
    private final boolean hasSeq;
    private final String codec;
    private final long size;
    private final long handle;
    private final Hold hold;
    private final Cleaner.Cleanable cleanable;

    /** The direct buffer over the bytes, kept private; only read-only views of it leave. */
    private ByteBuffer root;
    private boolean closed;

    /** Called by the native library for each item it hands out. */
    Item(long handle, long ts, long seq, boolean hasSeq, int codecKind, String codecName, long size) {
        this.handle = handle;
        this.ts = ts;
        this.seq = seq;
        this.hasSeq = hasSeq;
        this.codec = Codec.name(codecKind, codecName);
        this.size = size;
        this.hold = new Hold(handle, size);
        this.cleanable = Native.CLEANER.register(this, new Drop(hold));
    }

    /** The item's timestamp. */
    public long ts() {
        return ts;
    }

    /** For a queue item, its position in the queue's insertion order; empty for channel items. */
    public OptionalLong seq() {
        return hasSeq ? OptionalLong.of(seq) : OptionalLong.empty();
    }

    /** The codec name: {@code raw}, {@code utf8}, {@code json}, {@code npy} or an application's. */
    public String codec() {
        return codec;
    }

    /** The payload's size in bytes. */
    public long size() {
        return size;
    }

    /**
     * The item's bytes: a read-only direct view, zero-copy, positioned at 0 with limit {@link #size()}
     * and byte order big-endian (set the order you need on the view). See the class doc for how long
     * it stays valid (as long as it is reachable, even after {@link #close()}); {@link #dataUntilClose()}
     * trades that safety for prompt release.
     *
     * @throws ClosedException the item was closed
     * @throws InvalidArgumentException the item is larger than a ByteBuffer can be (2^31-1 bytes)
     */
    public ByteBuffer data() throws StampedeException {
        ByteBuffer buffer;
        synchronized (this) {
            checkOpen();
            if (size == 0) {
                return EMPTY.duplicate();
            }
            if (root == null) {
                root = Native.itemBuffer(handle);
                hold.acquire();
                Native.CLEANER.register(root, new Drop(hold));
            }
            buffer = root;
        }
        // The item stays reachable up to here (its own hold cannot be dropped while the buffer's is
        // being added); from here the view keeps the bytes alive through `root`.
        Reference.reachabilityFence(this);
        return buffer.asReadOnlyBuffer();
    }

    /**
     * The item's bytes like {@link #data()} — read-only, direct, zero-copy — but valid only until
     * {@link #close()}, which then releases them at once: a large frame goes straight back to the
     * channel's buffer pool instead of waiting for a garbage collection to find its buffers unreachable
     * (in a tight loop of 230 KB frames, 6–7× less latency; docs/JAVA.md). The price: touching this buffer,
     * or a view of it, after the item is closed reads memory that may already hold another item's bytes
     * or be unmapped (which crashes the JVM). Use it only where the buffer provably does not outlive the
     * item — read inside a try-with-resources block, never stored.
     *
     * <p>Because of that price it is opt-in: unless the system property {@code stampede.unsafeBuffers}
     * is {@code true} (read at each call), this returns {@link #data()}, which is always safe.
     *
     * @throws ClosedException the item was closed
     * @throws InvalidArgumentException the item is larger than a ByteBuffer can be (2^31-1 bytes)
     */
    public ByteBuffer dataUntilClose() throws StampedeException {
        if (!Boolean.getBoolean(UNSAFE_BUFFERS)) {
            return data();
        }
        synchronized (this) {
            checkOpen();
            if (size == 0) {
                return EMPTY.duplicate();
            }
            // No hold of its own: the item's hold covers it until close.
            return Native.itemBuffer(handle).asReadOnlyBuffer();
        }
    }

    /** The system property that lets {@link #dataUntilClose()} hand out buffers that die at close. */
    public static final String UNSAFE_BUFFERS = "stampede.unsafeBuffers";

    /** A copy of the item's bytes. */
    public byte[] bytes() throws StampedeException {
        long h = openHandle();
        try {
            return Native.itemCopy(h);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The bytes decoded as UTF-8 text (for {@code utf8} and {@code json} items); {@code InvalidArgument} if they are not. */
    public String text() throws StampedeException {
        byte[] bytes = bytes();
        try {
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes));
            return chars.toString();
        } catch (CharacterCodingException e) {
            throw Errors.invalid("text", "item ts=" + ts, "the bytes are not UTF-8 (" + e + "); use data()");
        }
    }

    /**
     * The {@code .npy} header of the payload: dtype, shape, where the data starts. {@code InvalidArgument}
     * naming the rule broken for a payload that is not a valid {@code .npy} file.
     */
    public NpyHeader npy() throws StampedeException {
        long h = openHandle();
        try {
            return Native.itemNpy(h, ts);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * The array data of an {@code npy} item (after the header), as a read-only zero-copy view in the
     * dtype's byte order ({@code <} little-endian, {@code >} big-endian, else native).
     */
    public ByteBuffer npyData() throws StampedeException {
        NpyHeader header = npy();
        ByteBuffer view = data();
        view.position((int) header.dataOffset());
        view.limit((int) (header.dataOffset() + header.dataBytes()));
        return view.slice().order(header.byteOrder());
    }

    /** {@code true} once {@link #close()} ran. */
    public synchronized boolean isClosed() {
        return closed;
    }

    /**
     * Gives up this item's hold on its bytes (idempotent). Buffers obtained from {@link #data()} stay
     * valid while reachable; the bytes go when the last of them does.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            root = null;
        }
        cleanable.clean();
    }

    /** {@code true} once the native bytes were released (for tests). */
    boolean released() {
        return hold.released();
    }

    /** The native handle, or {@code Closed} once the item is closed. */
    synchronized long openHandle() throws ClosedException {
        checkOpen();
        return handle;
    }

    private void checkOpen() throws ClosedException {
        if (closed) {
            throw Errors.closed("item ts=" + ts, "the item was closed; get it again, or keep it open while reading");
        }
    }

    @Override
    public String toString() {
        return "Item(ts=" + ts + (hasSeq ? ", seq=" + seq : "") + ", codec=\"" + codec + "\", size=" + size + ")";
    }

    /**
     * Who holds the native bytes: the item until closed or unreachable, and its buffer (with every view
     * of it, which keep it reachable) until unreachable. The last to let go releases them.
     */
    private static final class Hold {
        private final long handle;
        private final long size;
        private final AtomicInteger holders = new AtomicInteger(1);

        Hold(long handle, long size) {
            this.handle = handle;
            this.size = size;
            HeldBytes.add(size);
        }

        void acquire() {
            holders.incrementAndGet();
        }

        boolean released() {
            return holders.get() == 0;
        }

        void release() {
            if (holders.decrementAndGet() == 0) {
                Native.release(handle);
                HeldBytes.remove(size);
            }
        }
    }

    /** One holder's release, run by the cleaner (or by {@link #close()}); refers to no item or buffer. */
    private static final class Drop implements Runnable {
        private final Hold hold;

        Drop(Hold hold) {
            this.hold = hold;
        }

        @Override
        public void run() {
            hold.release();
        }
    }

    static ByteOrder orderOf(String descr) {
        if (descr.startsWith("<")) {
            return ByteOrder.LITTLE_ENDIAN;
        }
        if (descr.startsWith(">")) {
            return ByteOrder.BIG_ENDIAN;
        }
        return ByteOrder.nativeOrder();
    }
}
