package org.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The Java client as a client of a node ({@code stampede serve}, docs/NODES.md): the same calls,
 * errors and handlers through the fabric. Runs when {@code -Dstampede.serve=<stampede binary>}
 * names the node's binary (scripts/test.sh passes it); skipped otherwise, saying so.
 */
class RemoteTest {
    private static final Duration WATCHDOG = Duration.ofSeconds(30);

    private NodeProcess node;
    private ExecutorService pool;

    @BeforeEach
    void start() throws Exception {
        assumeTrue(NodeProcess.binary() != null, "no -Dstampede.serve=<stampede binary>: the node tests are skipped");
        node = new NodeProcess("java");
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void stop() throws Exception {
        if (pool != null) {
            pool.shutdownNow();
        }
        if (node != null) {
            node.close();
        }
    }

    /** Two sessions share a channel on the node; errors arrive with the same types and messages. */
    @Test
    void sessionsShareChannelsOnTheNode() throws Exception {
        try (Runtime camera = Stampede.connect(node.endpoint, WATCHDOG);
                Runtime display = Stampede.connect(node.endpoint, WATCHDOG)) {
            assertEquals(Optional.of("java"), camera.node());
            assertTrue(camera.nodes().contains("java"));
            Channel frames = camera.createChannel("camera/frames");
            try (Task producer = camera.task(0); ChannelOutput out = producer.attachOutput(frames);
                    Task viewer = display.task(Stampede.INFINITY);
                    ChannelInput in = viewer.attachInput(display.channel("camera/frames"))) {
                byte[] frame = Npy.encode("|u1", new long[] {2, 3}, new byte[] {1, 2, 3, 4, 5, 6});
                out.put(0, frame, PutOptions.DEFAULT.withCodec(Codec.NPY));
                out.put(1, "one");
                try (Item item = in.get(0, WATCHDOG)) {
                    assertEquals("2x3", item.npy().shapeText());
                    assertEquals(6, item.npyData().remaining());
                    assertTrue(item.data().isReadOnly());
                }
                try (Item item = in.get(Selector.NEWEST_UNSEEN, WATCHDOG)) {
                    assertEquals("one", item.text());
                }
                producer.setVirtualTime(5);
                BelowVisibilityException below = assertThrows(BelowVisibilityException.class,
                        () -> out.put(4, new byte[1]));
                assertEquals("put ts=4 on \"camera/frames\" is below the task's visibility 5", below.getMessage());
                NotAvailableException none = assertThrows(NotAvailableException.class,
                        () -> in.get(3, Duration.ZERO));
                assertEquals(Optional.empty(), none.reason());
                assertThrows(AlreadyExistsException.class, () -> display.createChannel("camera/frames"));
            }
        }
    }

    /**
     * A client's prefetch default goes to every channel input that attaches without a policy; an
     * input's own policy wins. The node reports each input's policy in the graph.
     */
    @Test
    void aClientsPrefetchDefaultGoesToItsInputs() throws Exception {
        ConnectOptions off = ConnectOptions.DEFAULT.withTimeout(WATCHDOG).withPrefetch(Prefetch.OFF);
        try (Runtime rt = Stampede.connect(node.endpoint, off); Task display = rt.task(Stampede.INFINITY)) {
            Channel frames = rt.createChannel("prefetch/frames");
            display.attachInput(frames);
            assertTrue(rt.graphJson().contains("\"policy\":\"off\""), rt.graphJson());
            display.attachInput(frames, InputOptions.DEFAULT.withPrefetch(Prefetch.NEWEST));
            assertTrue(rt.graphJson().contains("\"policy\":\"newest\""), rt.graphJson());
        }
        try (Runtime rt = Stampede.connect(node.endpoint, WATCHDOG); Task display = rt.task(Stampede.INFINITY)) {
            display.attachInput(rt.channel("prefetch/frames"));
            assertTrue(rt.graphJson().contains("\"policy\":\"auto\""), rt.graphJson());
        }
    }

    /** A handler registered through a client runs on the client for items reclaimed on the node. */
    @Test
    void reclaimHandlersRunOnTheClient() throws Exception {
        try (Runtime rt = Stampede.connect(node.endpoint, WATCHDOG)) {
            Channel c = rt.createChannel("c");
            List<Long> seen = new CopyOnWriteArrayList<>();
            List<Thread> threads = new CopyOnWriteArrayList<>();
            c.onReclaim(ts -> {
                seen.add(ts);
                threads.add(Thread.currentThread());
            });
            try (Task p = rt.task(0); Task t = rt.task(Stampede.INFINITY); ChannelOutput out = p.attachOutput(c);
                    ChannelInput in = t.attachInput(c)) {
                for (int ts = 0; ts < 3; ts++) {
                    out.put(ts, new byte[] {(byte) ts});
                }
                p.setVirtualTime(10);
                in.consumeUntil(2);
                long deadline = System.nanoTime() + WATCHDOG.toNanos();
                while (seen.size() < 3 && System.nanoTime() < deadline) {
                    Thread.sleep(5); // the node's report travels to the client: poll with a watchdog
                }
                assertEquals(List.of(0L, 1L, 2L), seen);
                assertEquals(0, c.stats().handlerErrors());
            }
        }
    }

    /**
     * With a put window a put returns before the node's reply: the full channel's refusal of the
     * third put is thrown by flush, naming its timestamp, once (docs/NODES.md, "Pipelined puts").
     */
    @Test
    void aPipelinedPutsErrorIsThrownByFlush() throws Exception {
        try (Runtime rt = Stampede.connect(node.endpoint, WATCHDOG)) {
            Channel c = rt.createChannel("window", ChannelOptions.DEFAULT.withCapacity(2));
            long t = rt.tsMin();
            PutOptions atOnce = PutOptions.DEFAULT.withTimeout(Duration.ZERO);
            try (Task producer = rt.task(t); ChannelOutput out = producer.attachOutput(c, 4)) {
                out.put(t + 1, new byte[] {1}, atOnce);
                out.put(t + 2, new byte[] {2}, atOnce);
                out.put(t + 3, new byte[] {3}, atOnce);
                FullException full = assertThrows(FullException.class, out::flush);
                assertTrue(full.getMessage().startsWith("put ts=" + (t + 3) + " on \"window\": full"), full.getMessage());
                out.flush();
                assertEquals(List.of(t + 1, t + 2), Arrays.stream(c.timestamps()).boxed().toList());
                assertThrows(InvalidArgumentException.class, () -> producer.attachOutput(c, 65));
                assertThrows(InvalidArgumentException.class, () -> producer.attachOutput(c, -1));
            }
        }
    }

    /** A get blocked on the node wakes with Closed when its connection is detached. */
    @Test
    void blockedRemoteGetIsWokenByDetach() throws Exception {
        try (Runtime rt = Stampede.connect(node.endpoint, WATCHDOG)) {
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
                long deadline = System.nanoTime() + WATCHDOG.toNanos();
                while ((getter[0] == null || Arrays.stream(getter[0].getStackTrace())
                        .noneMatch(f -> f.isNativeMethod() && f.getMethodName().equals("channelGet")))
                        && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                in.detach();
                assertInstanceOf(ClosedException.class, outcome.get(WATCHDOG.toSeconds(), TimeUnit.SECONDS));
            }
        }
    }
}
