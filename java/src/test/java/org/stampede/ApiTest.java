package org.stampede;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the shared vectors do not cover: the Java API's own contract — exceptions' types, fields and
 * messages, zero-copy read-only buffers and their lifetime, close semantics, GC handlers, blocking
 * calls woken by detach and close, arguments refused before they reach the native side. Each test
 * runs on a fresh embedded runtime; waits use conditions with a watchdog, never a fixed sleep.
 */
class ApiTest {
    /** Longest a condition may take to hold before the test fails (a watchdog, not a timing claim). */
    private static final Duration WATCHDOG = Duration.ofSeconds(30);

    private Runtime rt;
    private ExecutorService pool;

    @BeforeEach
    void start() {
        rt = new Runtime();
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void stop() {
        pool.shutdownNow();
        rt.close();
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + WATCHDOG.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("watchdog: " + what + " did not happen within " + WATCHDOG);
            }
            Thread.sleep(1);
        }
    }

    /** `thread` is inside the native half of `method` (blocked there, or about to be). */
    private static BooleanSupplier inNative(Thread thread, String method) {
        return () -> Arrays.stream(thread.getStackTrace()).anyMatch(f -> f.getMethodName().equals(method)
                && f.isNativeMethod());
    }

    private <T> T within(Future<T> future) throws Exception {
        return future.get(WATCHDOG.toSeconds(), TimeUnit.SECONDS);
    }

    // ---- exceptions ---------------------------------------------------------------------------

    /** Each Rust error arrives as its own checked exception, with the Rust message and its fields. */
    @Test
    void errorsArriveAsTypedExceptionsWithTheRustMessage() throws Exception {
        Channel frames = rt.createChannel("frames", ChannelOptions.DEFAULT.withCapacity(1));
        try (Task camera = rt.task(10); Task viewer = rt.task(Stampede.INFINITY);
                ChannelOutput out = camera.attachOutput(frames); ChannelInput in = viewer.attachInput(frames)) {
            BelowVisibilityException below = assertThrows(BelowVisibilityException.class, () -> out.put(9, new byte[1]));
            assertEquals("put ts=9 on \"frames\" is below the task's visibility 10", below.getMessage());
            assertEquals("frames", below.name());
            assertEquals(OptionalLong.of(9), below.ts());
            assertEquals(10, below.limit());

            InvalidTimestampException invalid = assertThrows(InvalidTimestampException.class,
                    () -> out.put(Stampede.INFINITY, new byte[1]));
            assertTrue(invalid.getMessage().contains("is not a valid item timestamp"), invalid.getMessage());

            out.put(12, "twelve");
            DuplicateTimestampException duplicate = assertThrows(DuplicateTimestampException.class,
                    () -> out.put(12, "again"));
            assertTrue(duplicate.getMessage().startsWith("put ts=12 on \"frames\": the channel already holds"));

            FullException full = assertThrows(FullException.class,
                    () -> out.put(13, new byte[1], PutOptions.DEFAULT.withTimeout(Duration.ZERO)));
            assertTrue(full.getMessage().startsWith("put ts=13 on \"frames\": full ("), full.getMessage());
            assertFalse(full.canNeverFit());

            NotAvailableException missing = assertThrows(NotAvailableException.class,
                    () -> in.get(11, Duration.ZERO));
            assertEquals("get ts=11 on \"frames\": not available (previous=none, next=12); wait with a timeout or "
                    + "pick a neighbour", missing.getMessage());
            assertEquals(OptionalLong.empty(), missing.previous());
            assertEquals(OptionalLong.of(12), missing.next());
            assertEquals("ts=11", missing.selector());
            assertFalse(missing.settled());

            in.consume(12);
            AlreadyConsumedException consumed = assertThrows(AlreadyConsumedException.class,
                    () -> in.get(12, Duration.ZERO));
            assertEquals(OptionalLong.of(12), consumed.ts());
        }
        AlreadyExistsException exists = assertThrows(AlreadyExistsException.class, () -> rt.createChannel("frames"));
        assertEquals("a channel or queue named \"frames\" already exists; use rt.lookup(\"frames\")", exists.getMessage());
        NotFoundException notFound = assertThrows(NotFoundException.class, () -> rt.lookup("nothing"));
        assertEquals("no channel or queue is named \"nothing\"; create it first or check rt.names()",
                notFound.getMessage());
        InvalidArgumentException bad = assertThrows(InvalidArgumentException.class, () -> rt.createChannel("bad//name"));
        assertTrue(bad.reason().isPresent());
        assertInstanceOf(StampedeException.class, bad);
        assertThrows(NotFoundException.class, () -> rt.queue("frames"));
    }

    /** Reclaimed: an exact get below ts_min names the item and why. */
    @Test
    void reclaimedItemsSayWhy() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(1, "one");
            in.consumeUntil(1);
            p.setVirtualTime(5);
            ReclaimedException reclaimed = assertThrows(ReclaimedException.class, () -> in.get(1, Duration.ZERO));
            assertEquals(OptionalLong.of(1), reclaimed.ts());
            assertTrue(reclaimed.getMessage().startsWith("get ts=1 on \"c\": reclaimed ("), reclaimed.getMessage());
        }
    }

    /** A connection to nothing is Unreachable once the timeout expires, not a hang. */
    @Test
    void aBoundOnLagLetsASlowReaderFallBehind() throws Exception {
        Channel frames = rt.createChannel("frames");
        try (Task camera = rt.task(0); Task slow = rt.task(Stampede.INFINITY); ChannelOutput out = camera.attachOutput(frames);
                ChannelInput bounded = slow.attachInput(frames, InputOptions.DEFAULT.withMaxLagItems(2));
                ChannelInput byTs = slow.attachInput(frames, InputOptions.DEFAULT.withMaxLagTs(3))) {
            for (long ts = 0; ts < 10; ts++) {
                out.put(ts, "f");
            }
            camera.setVirtualTime(10);
            assertEquals(6, rt.tsMin()); // byTs holds 6 to 9, bounded 8 and 9
            try (Item item = bounded.get(Selector.OLDEST_UNSEEN); Item oldest = byTs.get(Selector.OLDEST_UNSEEN)) {
                assertEquals(8, item.ts());
                assertEquals(6, oldest.ts());
            }
            assertThrows(InvalidArgumentException.class, () -> slow.attachInput(frames, InputOptions.DEFAULT.withMaxLagItems(0)));
            assertThrows(InvalidArgumentException.class, () -> slow.attachInput(frames, InputOptions.DEFAULT.withMaxLagTs(-5)));
        }
    }

    /** A prefetch policy is an input's option; embedded there is nothing to push, and the reads are the same. */
    @Test
    void aPrefetchPolicyIsAnInputOption() throws Exception {
        Channel frames = rt.createChannel("prefetched");
        try (Task camera = rt.task(0); Task display = rt.task(Stampede.INFINITY); ChannelOutput out = camera.attachOutput(frames);
                ChannelInput newest = display.attachInput(frames, InputOptions.DEFAULT.withPrefetch(Prefetch.NEWEST));
                ChannelInput off = display.attachInput(frames, InputOptions.DEFAULT.withPrefetch(Prefetch.OFF))) {
            for (long ts = 0; ts < 3; ts++) {
                out.put(ts, "f");
            }
            try (Item item = newest.get(Selector.NEWEST_UNSEEN); Item oldest = off.get(Selector.OLDEST_UNSEEN)) {
                assertEquals(2, item.ts());
                assertEquals(0, oldest.ts());
            }
        }
    }

    @Test
    void connectingToNoNodeIsUnreachable() {
        UnreachableException e = assertThrows(UnreachableException.class,
                () -> Stampede.connect("tcp/127.0.0.1:1", Duration.ofMillis(300)));
        assertTrue(e.getMessage().contains("unreachable"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> Stampede.connect("not an endpoint", Duration.ZERO));
    }

    /** Bad arguments are InvalidArgument before they reach the native side, never a crash. */
    @Test
    void badArgumentsAreExceptions() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); ChannelOutput out = p.attachOutput(c)) {
            assertThrows(InvalidArgumentException.class, () -> out.put(1, (byte[]) null));
            assertThrows(InvalidArgumentException.class, () -> out.put(1, (String) null));
            assertThrows(InvalidArgumentException.class, () -> out.put(1, new byte[4], 3, 2, null));
            assertThrows(InvalidArgumentException.class, () -> out.put(1, new byte[4], -1, 2, null));
            assertThrows(InvalidArgumentException.class,
                    () -> out.put(1, new byte[1], PutOptions.DEFAULT.withTimeout(Duration.ofSeconds(-1))));
            assertThrows(InvalidArgumentException.class,
                    () -> out.put(1, new byte[1], PutOptions.DEFAULT.withRefcount(0)));
            assertThrows(InvalidArgumentException.class, () -> rt.createChannel(null));
            assertThrows(InvalidArgumentException.class, () -> p.attachInput((Channel) null));
            InvalidArgumentException npy = assertThrows(InvalidArgumentException.class,
                    () -> out.put(2, new byte[] {1, 2, 3}, PutOptions.DEFAULT.withCodec(Codec.NPY)));
            assertTrue(npy.getMessage().contains("not a valid .npy payload"), npy.getMessage());
            assertThrows(InvalidArgumentException.class, () -> rt.createChannel("zero",
                    ChannelOptions.DEFAULT.withCapacity(0)));
        }
    }

    /** A stale native handle is a ClosedException, not a crash (the table never hands out pointers). */
    @Test
    void staleHandlesAreClosedNotCrashes() {
        Exception e = assertThrows(Exception.class, () -> Native.taskVirtualTime(Long.MAX_VALUE));
        assertInstanceOf(ClosedException.class, e);
        Exception other = assertThrows(Exception.class, () -> Native.runtimeTsMin(-7));
        assertInstanceOf(ClosedException.class, other);
    }

    /** A panic in the native library arrives as an IllegalStateException naming it, and the JVM goes on. */
    @Test
    void panicsDoNotCrossIntoTheJvm() throws Exception {
        IllegalStateException e = assertThrows(IllegalStateException.class, Native::panicForTests);
        assertTrue(e.getMessage().contains("a panic the Java tests asked for"), e.getMessage());
        assertEquals(0, rt.tsMin());
    }

    // ---- buffers ------------------------------------------------------------------------------

    /** Two gets of one item, on two connections, see the same memory: read-only, direct, no copy. */
    @Test
    void itemBuffersAreReadOnlyAndZeroCopy() throws Exception {
        Channel frames = rt.createChannel("frames");
        byte[] frame = new byte[320 * 240];
        for (int i = 0; i < frame.length; i++) {
            frame[i] = (byte) (i * 7);
        }
        try (Task camera = rt.task(0); Task a = rt.task(Stampede.INFINITY); Task b = rt.task(Stampede.INFINITY);
                ChannelOutput out = camera.attachOutput(frames); ChannelInput inA = a.attachInput(frames);
                ChannelInput inB = b.attachInput(frames)) {
            out.put(1, frame);
            frame[0] = 99; // copy-in: the stored item does not change
            try (Item first = inA.get(Selector.NEWEST); Item second = inB.get(1, Duration.ZERO)) {
                ByteBuffer x = first.data();
                ByteBuffer y = second.data();
                assertTrue(x.isDirect() && x.isReadOnly() && y.isDirect() && y.isReadOnly());
                assertEquals(frame.length, x.remaining());
                assertEquals(x, y);
                assertEquals(0, x.get(0));
                assertEquals(Native.bufferAddress(x), Native.bufferAddress(y), "one copy in memory, two views");
                assertEquals(Native.bufferAddress(x), Native.bufferAddress(first.data()));
                assertThrows(ReadOnlyBufferException.class, () -> x.put(0, (byte) 1));
                assertThrows(ReadOnlyBufferException.class, () -> x.duplicate().put((byte) 1));
                assertThrows(ReadOnlyBufferException.class, () -> x.slice().asIntBuffer().put(0, 1));
                assertEquals(ByteBuffer.wrap(first.bytes()), x);
                // Each call is an independent view.
                x.position(100);
                assertEquals(0, first.data().position());
            }
        }
    }

    /**
     * A buffer touched after its item is closed — even after the channel reclaimed the item and new items
     * of the same size reuse the channel's recycled memory — still reads the item's own bytes.
     */
    @Test
    void buffersStayValidAfterCloseAndReclamation() throws Exception {
        Channel frames = rt.createChannel("frames");
        int size = 64 * 1024; // above the pool's threshold: buffers are recycled
        try (Task camera = rt.task(0); Task viewer = rt.task(Stampede.INFINITY);
                ChannelOutput out = camera.attachOutput(frames); ChannelInput in = viewer.attachInput(frames)) {
            byte[] frame = new byte[size];
            Arrays.fill(frame, (byte) 1);
            out.put(0, frame);
            Item item = in.get(Selector.OLDEST);
            ByteBuffer view = item.data();
            item.close();
            assertThrows(ClosedException.class, item::data);
            assertThrows(ClosedException.class, item::bytes);
            assertEquals(0, item.ts()); // plain fields still answer
            in.consumeUntil(0);
            camera.setVirtualTime(1);
            assertEquals(0, frames.stats().liveItems(), "the channel reclaimed the item");
            for (int ts = 1; ts <= 20; ts++) {
                Arrays.fill(frame, (byte) (ts + 1));
                out.put(ts, frame);
                in.consumeUntil(ts);
                camera.setVirtualTime(ts + 1);
            }
            for (int i = 0; i < size; i++) {
                assertEquals(1, view.get(i), "byte " + i);
            }
        }
    }

    /**
     * dataUntilClose() is the same zero-copy memory as data(), and closing the item releases it at once
     * (no garbage collection needed), when no data() buffer holds it.
     */
    @Test
    void dataUntilCloseIsReleasedAtClose() throws Exception {
        System.setProperty(Item.UNSAFE_BUFFERS, "true");
        try {
            unsafeBuffersAreReleasedAtClose();
        } finally {
            System.clearProperty(Item.UNSAFE_BUFFERS);
        }
    }

    /** Out-of-range numbers are refused, not read as "none" (only -1 means none). */
    @Test
    void negativeBoundsAndRefcountsAreRefused() throws Exception {
        assertThrows(InvalidArgumentException.class, () -> rt.createChannel("a", ChannelOptions.DEFAULT.withCapacity(-5)));
        assertThrows(InvalidArgumentException.class, () -> rt.createChannel("b", ChannelOptions.DEFAULT.withMaxBytes(-100)));
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); ChannelOutput out = p.attachOutput(c)) {
            assertThrows(InvalidArgumentException.class, () -> out.put(1, new byte[] {1}, PutOptions.DEFAULT.withRefcount(-2)));
            out.put(1, new byte[] {1}, PutOptions.DEFAULT.withRefcount(1));
        }
    }

    /**
     * Without the opt-in, dataUntilClose() is data(): its buffer stays valid after close, whatever is
     * put and reclaimed since.
     */
    @Test
    void dataUntilCloseIsSafeWithoutTheOptIn() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            byte[] ones = new byte[65536];
            java.util.Arrays.fill(ones, (byte) 1);
            out.put(1, ones);
            Item item = in.get(1, null);
            ByteBuffer view = item.dataUntilClose();
            item.close();
            in.consume(1);
            p.setVirtualTime(2);
            byte[] other = new byte[65536];
            java.util.Arrays.fill(other, (byte) 42);
            for (long ts = 2; ts < 22; ts++) {
                out.put(ts, other);
                in.consume(ts);
                p.setVirtualTime(ts + 1);
            }
            assertEquals(1, view.get(0));
            assertEquals(1, view.get(65535));
        }
    }

    private void unsafeBuffersAreReleasedAtClose() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(1, new byte[] {4, 5, 6});
            Item item = in.get(1, null);
            ByteBuffer borrowed = item.dataUntilClose();
            assertTrue(borrowed.isDirect() && borrowed.isReadOnly());
            assertEquals(5, borrowed.get(1));
            assertEquals(Native.bufferAddress(item.data()), Native.bufferAddress(borrowed));
            item.close();
            assertThrows(ClosedException.class, item::dataUntilClose);
            await("the data() buffer collected", () -> {
                System.gc();
                return item.released();
            });
            Item again = in.get(1, null);
            assertEquals(5, again.dataUntilClose().get(1));
            again.close();
            assertTrue(again.released(), "released at close, without a collection");
        }
    }

    /** Items never closed, and their buffers, are released once unreachable. */
    @Test
    void unreachableItemsAreReleased() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(1, new byte[100]);
            long before = Stampede.nativeHandles();
            for (int i = 0; i < 1000; i++) {
                in.get(1, Duration.ZERO).data(); // neither the item nor its buffer is kept
            }
            await("the cleaner releasing 1000 items", () -> {
                System.gc();
                return Stampede.nativeHandles() <= before;
            });
            // (Other tests' objects may be released meanwhile too: the count can only fall below.)
        }
    }

    /** Text, npy headers and the npy data view. */
    @Test
    void itemsDecodeTextAndNpy() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(1, "héllo");
            short[] values = {1, -2, 300};
            ByteBuffer data = ByteBuffer.allocate(6).order(ByteOrder.LITTLE_ENDIAN);
            for (short v : values) {
                data.putShort(v);
            }
            out.put(2, Npy.encode("<i2", new long[] {3}, data.array()), PutOptions.DEFAULT.withCodec(Codec.NPY));
            out.put(3, "{\"a\": 1}", PutOptions.DEFAULT.withCodec(Codec.JSON));
            try (Item text = in.get(1, null); Item array = in.get(2, null); Item json = in.get(3, null)) {
                assertEquals("utf8", text.codec());
                assertEquals("héllo", text.text());
                assertEquals(6, text.size());
                NpyHeader header = array.npy();
                assertEquals(header, Npy.header(array.data()), "read in place from a direct buffer");
                assertEquals("<i2", header.descr());
                assertArrayEquals(new long[] {3}, header.shape());
                assertEquals(2, header.itemSize());
                assertEquals(0, header.dataOffset() % 64, "data aligned");
                ByteBuffer view = array.npyData();
                assertEquals(ByteOrder.LITTLE_ENDIAN, view.order());
                assertEquals(-2, view.getShort(2));
                assertEquals(300, view.getShort(4));
                assertEquals("json", json.codec());
                assertThrows(InvalidArgumentException.class, text::npy);
            }
        }
        byte[] header = Npy.encodeHeader("|u1", 240, 320);
        assertEquals("240x320", Npy.header(Npy.encode("|u1", new long[] {240, 320}, new byte[240 * 320])).shapeText());
        assertEquals("1.0", Npy.header(header).version());
        assertThrows(InvalidArgumentException.class, () -> Npy.encodeHeader("|O", 3));
        assertThrows(InvalidArgumentException.class, () -> Npy.header(new byte[] {0, 1, 2}));
    }

    /** Puts from heap and direct buffers read position to limit; a put of an item shares its bytes. */
    @Test
    void putsFromBuffersAndItems() throws Exception {
        Channel c = rt.createChannel("c");
        Channel copy = rt.createChannel("copy");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelOutput again = p.attachOutput(copy); ChannelInput in = t.attachInput(c);
                ChannelInput inCopy = t.attachInput(copy)) {
            ByteBuffer heap = ByteBuffer.wrap("xxabcxx".getBytes(StandardCharsets.US_ASCII));
            heap.position(2).limit(5);
            out.put(1, heap);
            assertEquals(2, heap.position(), "the position does not move");
            ByteBuffer direct = ByteBuffer.allocateDirect(8);
            direct.put("__def".getBytes(StandardCharsets.US_ASCII)).flip().position(2);
            out.put(2, direct);
            out.put(3, heap.asReadOnlyBuffer());
            try (Item one = in.get(1, null); Item two = in.get(2, null); Item three = in.get(3, null)) {
                assertEquals("abc", new String(one.bytes(), StandardCharsets.US_ASCII));
                assertEquals("def", new String(two.bytes(), StandardCharsets.US_ASCII));
                assertEquals("abc", new String(three.bytes(), StandardCharsets.US_ASCII));
                again.put(7, one, PutOptions.DEFAULT.withCodec(Codec.UTF8));
                try (Item shared = inCopy.get(7, null)) {
                    assertEquals(Native.bufferAddress(one.data()), Native.bufferAddress(shared.data()));
                    assertEquals("utf8", shared.codec());
                }
                again.put(8, two.data()); // a read-only direct view: copied straight from the item's memory
                try (Item copied = inCopy.get(8, null)) {
                    assertEquals("def", copied.text());
                    assertNotEquals(Native.bufferAddress(two.data()), Native.bufferAddress(copied.data()));
                }
            }
            List<Item> range = in.getRange(0, 10);
            assertEquals(List.of(1L, 2L, 3L), range.stream().map(Item::ts).toList());
            range.forEach(Item::close);
            // A long range of items with an application codec (a Java string each) in one call.
            for (int ts = 100; ts < 1100; ts++) {
                out.put(ts, new byte[] {1}, PutOptions.DEFAULT.withCodec("app/frame"));
            }
            List<Item> many = in.getRange(100, 2000);
            assertEquals(1000, many.size());
            assertEquals("app/frame", many.get(999).codec());
            many.forEach(Item::close);
        }
    }

    // ---- close semantics ----------------------------------------------------------------------

    /** Closing is idempotent, and what is closed fails Closed with Rust's message. */
    @Test
    void closedThingsFailClosed() throws Exception {
        Channel c = rt.createChannel("c");
        Task p = rt.task(0);
        ChannelOutput out = p.attachOutput(c);
        Task t = rt.task(Stampede.INFINITY);
        ChannelInput in = t.attachInput(c);
        out.put(1, "one");
        in.close();
        in.close();
        ClosedException detached = assertThrows(ClosedException.class, () -> in.get(Selector.OLDEST, Duration.ZERO));
        assertEquals("\"c\" is closed: the connection was detached", detached.getMessage());
        assertEquals(OptionalLong.empty(), detached.ts());
        p.close();
        p.close();
        assertThrows(ClosedException.class, () -> out.put(2, "two"));
        assertEquals(1, c.stats().puts());
        c.destroy();
        assertThrows(NotFoundException.class, () -> rt.lookup("c"));
        rt.close();
        rt.close();
        assertTrue(rt.isClosed());
        assertThrows(ClosedException.class, () -> rt.createChannel("d"));
        assertThrows(ClosedException.class, () -> rt.task(0));
    }

    // ---- blocking calls -----------------------------------------------------------------------

    /** A get blocked waiting for an item wakes with Closed when its connection is detached. */
    @Test
    void blockedGetIsWokenByDetach() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task t = rt.task(Stampede.INFINITY); ChannelInput in = t.attachInput(c)) {
            Thread[] getter = new Thread[1];
            Future<Object> outcome = pool.submit(() -> {
                getter[0] = Thread.currentThread();
                try (Item item = in.get(Selector.NEWEST_UNSEEN)) {
                    return "got " + item;
                } catch (StampedeException e) {
                    return e;
                }
            });
            await("the getter blocking", () -> getter[0] != null && inNative(getter[0], "channelGet").getAsBoolean());
            in.detach();
            assertInstanceOf(ClosedException.class, within(outcome));
        }
    }

    /** A blocked get wakes on an arrival, and on the runtime closing. */
    @Test
    void blockedGetIsWokenByArrivalAndByClose() throws Exception {
        Channel c = rt.createChannel("c");
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            Thread[] getter = new Thread[1];
            Future<Long> arrival = pool.submit(() -> {
                getter[0] = Thread.currentThread();
                // OLDEST, not OLDEST_UNSEEN: producers race, so items arrive out of timestamp order, and
                // OLDEST_UNSEEN reads a stream in order (it never goes back below what it got).
                try (Item item = in.get(Selector.OLDEST, WATCHDOG)) {
                    return item.ts();
                }
            });
            await("the getter blocking", () -> getter[0] != null && inNative(getter[0], "channelGet").getAsBoolean());
            out.put(5, "five");
            assertEquals(5L, within(arrival));

            Future<Object> closed = pool.submit(() -> {
                try (Item item = in.get(Selector.OLDEST_UNSEEN)) {
                    return "got " + item;
                } catch (StampedeException e) {
                    return e;
                }
            });
            rt.close();
            assertInstanceOf(ClosedException.class, within(closed));
        }
    }

    /** A put blocked on a full channel wakes when GC makes room. */
    @Test
    void blockedPutIsWokenByReclamation() throws Exception {
        Channel c = rt.createChannel("c", ChannelOptions.DEFAULT.withCapacity(1));
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(1, "one");
            Thread[] putter = new Thread[1];
            Future<?> put = pool.submit(() -> {
                putter[0] = Thread.currentThread();
                out.put(2, "two");
                return null;
            });
            await("the putter blocking", () -> putter[0] != null && inNative(putter[0], "putArray").getAsBoolean());
            in.consume(1);
            p.setVirtualTime(2);
            within(put);
            assertArrayEquals(new long[] {2}, c.timestamps());
        }
    }

    // ---- GC handlers --------------------------------------------------------------------------

    /**
     * Channel and runtime handlers see each reclaimed timestamp; one that throws is counted and does not
     * stop the others; a handler can be replaced and removed.
     */
    @Test
    void reclaimHandlersSeeEachReclaimedItem() throws Exception {
        Channel c = rt.createChannel("c");
        List<Long> seen = new CopyOnWriteArrayList<>();
        List<String> everywhere = new CopyOnWriteArrayList<>();
        c.onReclaim(seen::add);
        rt.onReclaim((name, ts) -> everywhere.add(name + "@" + ts));
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            for (int ts = 0; ts < 5; ts++) {
                out.put(ts, new byte[] {(byte) ts});
            }
            p.setVirtualTime(10);
            in.consumeUntil(2);
            assertEquals(List.of(0L, 1L, 2L), seen);
            assertEquals(List.of("c@0", "c@1", "c@2"), everywhere);

            Thread.UncaughtExceptionHandler previous = Thread.currentThread().getUncaughtExceptionHandler();
            List<Throwable> reported = new ArrayList<>();
            Thread.currentThread().setUncaughtExceptionHandler((thread, e) -> reported.add(e));
            try {
                c.onReclaim(ts -> {
                    throw new IllegalStateException("handler bug at " + ts);
                });
                in.consume(3);
            } finally {
                Thread.currentThread().setUncaughtExceptionHandler(previous);
            }
            assertEquals(1, reported.size());
            assertEquals("handler bug at 3", reported.get(0).getMessage());
            assertEquals(1, c.stats().handlerErrors());
            assertEquals(1, rt.stats().handlerErrors());
            assertEquals(List.of("c@0", "c@1", "c@2", "c@3"), everywhere, "the runtime handler still ran");

            c.onReclaim(null);
            rt.onReclaim(null);
            in.consume(4);
            assertEquals(List.of(0L, 1L, 2L), seen);
            assertEquals(4, everywhere.size());
            assertEquals(5, c.stats().reclaimed());
        }
    }

    /** Reference counts reclaim early, and the handler runs for it. */
    @Test
    void referenceCountsReclaimEarly() throws Exception {
        Channel c = rt.createChannel("c");
        List<Long> seen = new CopyOnWriteArrayList<>();
        c.onReclaim(seen::add);
        try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                ChannelInput in = t.attachInput(c)) {
            out.put(7, new byte[3], PutOptions.DEFAULT.withRefcount(1));
            in.consume(7);
            assertEquals(List.of(7L), seen);
            assertEquals(0, rt.tsMin());
        }
    }

    // ---- queues, names, stats, watch ----------------------------------------------------------

    /** A queue hands each item to one getter; items carry their sequence number; refcounts are refused. */
    @Test
    void queuesHandEachItemToOneGetter() throws Exception {
        Queue work = rt.createQueue("work");
        try (Task p = rt.task(0); Task w = rt.task(Stampede.INFINITY); QueueOutput out = p.attachOutput(work);
                QueueInput in = w.attachInput(work)) {
            out.put(1, "a");
            out.put(1, "b");
            assertThrows(InvalidArgumentException.class, () -> out.put(2, "c", PutOptions.DEFAULT.withRefcount(1)));
            try (Item a = in.get(Duration.ZERO); Item b = in.get(Duration.ZERO)) {
                assertEquals("a", a.text());
                assertEquals("b", b.text());
                assertNotEquals(a.seq(), b.seq());
                assertThrows(NotAvailableException.class, () -> in.get(Duration.ZERO));
                in.consume(b);
                in.consume(1);
            }
            assertEquals(0, work.stats().liveItems());
            assertEquals(2, work.stats().reclaimed());
        }
    }

    /** Names, lookups, equality, info and stats. */
    @Test
    void namesInfoAndStats() throws Exception {
        Channel left = rt.createChannel("camera/left", ChannelOptions.DEFAULT.withCapacity(30).withMaxBytes(1 << 20)
                .withCodec(Codec.NPY).withDescription("left eye").withRetention(Retention.CURRENT_READERS));
        rt.createQueue("camera/work");
        rt.createChannel("cameras");
        assertEquals(List.of("camera/left", "camera/work"), rt.names("camera/"));
        assertEquals(3, rt.names().size());
        Container found = rt.lookup("camera/left");
        assertEquals(left, found);
        assertEquals(left.hashCode(), found.hashCode());
        assertNotEquals(left, rt.lookup("cameras"));
        Info info = left.info();
        assertEquals("channel", info.kind());
        assertEquals(OptionalLong.of(30), info.capacity());
        assertEquals(OptionalLong.of(1 << 20), left.maxBytes());
        assertEquals(java.util.Optional.of("npy"), info.codec());
        assertEquals("left eye", info.description());
        assertEquals(Retention.CURRENT_READERS, left.retention());
        assertInstanceOf(Queue.class, rt.lookup("camera/work"));
        assertEquals(0, left.stats().liveItems());
        assertEquals(java.util.Optional.empty(), left.diskStats());
        assertEquals(java.util.Optional.empty(), rt.node());
        assertTrue(rt.graphJson().contains("camera/left"));
        assertEquals(3, rt.stats().containers());
    }

    /** A watch reports what exists, then creations and destructions; it ends on its timeout. */
    @Test
    void watchReportsNames() throws Exception {
        rt.createChannel("w/a");
        try (Watch watch = rt.watch("w/", Duration.ofMillis(100))) {
            WatchEvent existing = watch.next().orElseThrow();
            assertEquals("created", existing.kind());
            assertEquals(java.util.Optional.of("w/a"), existing.name());
            assertEquals(java.util.Optional.of("channel"), existing.containerKind());
            Queue queue = rt.createQueue("w/b");
            WatchEvent created = watch.next().orElseThrow();
            assertEquals("created", created.kind());
            assertEquals(java.util.Optional.of("w/b"), created.name());
            assertEquals(java.util.Optional.of("queue"), created.containerKind());
            queue.destroy();
            WatchEvent destroyed = watch.next().orElseThrow();
            assertEquals("destroyed", destroyed.kind());
            assertEquals(java.util.Optional.of("w/b"), destroyed.name());
            assertTrue(watch.next().isEmpty());
        }
    }

    /** Closing a watch ends a next() blocked on it (no timeout) at once, with nothing. */
    @Test
    void closingAWatchEndsABlockedNext() throws Exception {
        Watch watch = rt.watch("nothing/", null);
        java.util.concurrent.CompletableFuture<Boolean> ended = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return watch.next().isEmpty();
            } catch (StampedeException e) {
                return e instanceof ClosedException;
            }
        });
        Thread.sleep(200);
        assertFalse(ended.isDone(), "next() waits while nothing happens");
        watch.close();
        assertTrue(ended.get(5, java.util.concurrent.TimeUnit.SECONDS), "next() ended with nothing");
    }

    /** Tasks: virtual time, visibility, children, names. */
    @Test
    void tasksHoldVirtualTime() throws Exception {
        try (Task t = rt.task(5)) {
            assertEquals(5, t.virtualTime());
            assertEquals(5, t.visibility());
            t.setName("tracker 1");
            assertEquals(java.util.Optional.of("tracker 1"), t.name());
            assertThrows(BelowVisibilityException.class, () -> t.spawn(4));
            try (Task child = t.spawn(7)) {
                assertEquals(7, child.virtualTime());
                assertNotEquals(t.id(), child.id());
            }
        }
        assertThrows(InvalidTimestampException.class, () -> rt.task(-1));
    }

    /** Several threads put and get concurrently through their own connections; nothing is lost. */
    @Test
    void threadsShareChannels() throws Exception {
        Channel c = rt.createChannel("c");
        int producers = 4;
        int perProducer = 250;
        try (Task reader = rt.task(Stampede.INFINITY); ChannelInput in = reader.attachInput(c)) {
            List<Future<?>> puts = new ArrayList<>();
            for (int k = 0; k < producers; k++) {
                int first = k;
                // Created here, not in the thread: once a producer is done and its items consumed,
                // ts_min passes 0 and a root task could no longer start there.
                Task p = rt.task(0);
                puts.add(pool.submit(() -> {
                    try (p; ChannelOutput out = p.attachOutput(c)) {
                        for (int i = 0; i < perProducer; i++) {
                            out.put((long) i * producers + first, new byte[] {(byte) first});
                        }
                    }
                    return null;
                }));
            }
            long got = 0;
            while (got < producers * perProducer) {
                // OLDEST, not OLDEST_UNSEEN: producers race, so items arrive out of timestamp order, and
                // OLDEST_UNSEEN reads a stream in order (it never goes back below what it got).
                try (Item item = in.get(Selector.OLDEST, WATCHDOG)) {
                    got++;
                    in.consume(item.ts());
                }
            }
            for (Future<?> put : puts) {
                within(put);
            }
            assertEquals(producers * perProducer, c.stats().puts());
        }
    }

    /** Selectors print as Rust and the error messages write them. */
    @Test
    void selectorsPrintAsRust() {
        assertEquals("NEWEST_UNSEEN", Selector.NEWEST_UNSEEN.toString());
        assertEquals("ts=42", Selector.at(42).toString());
        assertEquals(Selector.at(3), Selector.at(3));
    }
}
