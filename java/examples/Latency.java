import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.stampede.Channel;
import org.stampede.ChannelInput;
import org.stampede.ChannelOutput;
import org.stampede.Item;
import org.stampede.Runtime;
import org.stampede.Selector;
import org.stampede.Stampede;
import org.stampede.StampedeException;
import org.stampede.Task;

/**
 * One-way hand-off latency from Java, beside the Rust client's figures ({@code cargo run --release -p
 * stampede-bench --bin handoff} and {@code --bin remote}) and a Java reference: the same ping-pong,
 * through the JNI binding.
 *
 * <p>A (virtual time i) puts ts=i into {@code ping}, advances its virtual time to i+1, blocks on an
 * exact get of i from {@code pong}, reads it and consumes it. B (virtual time INFINITY, on another
 * thread) blocks on NEWEST_UNSEEN of {@code ping}, reads it, puts its own payload at the same ts into
 * {@code pong} and consumes i. Both items are reclaimed inside the loop. One way = round trip / 2. Each
 * receiver reads the first and last byte through the item's zero-copy buffer; puts copy the payload
 * once (copy-in from a {@code byte[]}). Each is run twice: reading through {@code Item.data()} (the
 * bytes stay held until the buffer is garbage-collected) and through {@code Item.dataUntilClose()} (the
 * bytes go back to the channel's buffer pool at close).
 *
 * <ul>
 *   <li>embedded: both tasks on one runtime in this process (Rust: {@code handoff}, impl "stampede");
 *       beside it, {@code ArrayBlockingQueue(1)} ping-pong sending {@code buf.clone()} (Java's
 *       analogue of crossbeam {@code bounded(1)}).</li>
 *   <li>remote (with {@code --connect <endpoint>}): A and B are two client sessions of the node
 *       (Rust: {@code remote}, impl "stampede remote (serve, tcp loopback)").</li>
 * </ul>
 *
 * Usage: {@code Latency [--quick] [--connect <endpoint>]}. Prints one JSON object per line
 * (docs/BENCHMARKS.md, "How every benchmark measures and reports"; fields as
 * crates/stampede-bench/src/report.rs: bench, case, impl, p50_us, p99_us, mean_us, round_trips,
 * ratio_vs, ratio).
 */
public final class Latency {
    static final int SMALL_BYTES = 8;
    static final int IMAGE_BYTES = 230_400;

    public static void main(String[] args) throws Exception {
        boolean quick = false;
        String endpoint = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--quick" -> quick = true;
                case "--connect" -> endpoint = args[++i];
                default -> {
                    System.err.println("usage: Latency [--quick] [--connect <endpoint>]");
                    System.exit(2);
                }
            }
        }
        int rounds = quick ? 1 : 4;
        int roundTrips = quick ? 200 : 5_000;
        int warmup = quick ? 20 : 500;
        for (int bytes : new int[] {SMALL_BYTES, IMAGE_BYTES}) {
            String c = bytes + "B";
            List<Long> stampede = new ArrayList<>();
            List<Long> untilClose = new ArrayList<>();
            List<Long> queue = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                try (Runtime rt = new Runtime()) {
                    stampede.addAll(pingPong(rt, rt, "handoff/", bytes, warmup, roundTrips, false));
                }
                try (Runtime rt = new Runtime()) {
                    untilClose.addAll(pingPong(rt, rt, "handoff/", bytes, warmup, roundTrips, true));
                }
                queue.addAll(queuePingPong(bytes, warmup, roundTrips));
            }
            Summary s = Summary.of(stampede).divided(2);
            Summary u = Summary.of(untilClose).divided(2);
            Summary q = Summary.of(queue).divided(2);
            line("handoff", c, "stampede (Java, JNI; data())", s)
                    .field("copies", "put copies a byte[] once (copy-in); get is zero-copy (a read-only direct "
                            + "ByteBuffer, its bytes held until the buffer is collected)")
                    .field("ratio_vs", "java ArrayBlockingQueue(1)").field("ratio", s.p50 / q.p50)
                    .field("ratio_p99", s.p99 / q.p99).emit();
            line("handoff", c, "stampede (Java, JNI; dataUntilClose())", u)
                    .field("copies", "as data(), the bytes released at close (recycled by the channel)")
                    .field("ratio_vs", "java ArrayBlockingQueue(1)").field("ratio", u.p50 / q.p50)
                    .field("ratio_p99", u.p99 / q.p99).emit();
            line("handoff", c, "java ArrayBlockingQueue(1)", q)
                    .field("copies", "send copies the payload once (byte[] clone)").emit();
            if (endpoint != null) {
                List<Long> remote = new ArrayList<>();
                for (int r = 0; r < rounds; r++) {
                    try (Runtime a = Stampede.connect(endpoint, java.time.Duration.ofSeconds(20));
                            Runtime b = Stampede.connect(endpoint, java.time.Duration.ofSeconds(20))) {
                        String prefix = "bench/java-" + ProcessHandle.current().pid() + "-" + bytes + "-" + r + "/";
                        remote.addAll(pingPong(a, b, prefix, bytes, warmup / 4, roundTrips / 4, true));
                    }
                }
                Summary m = Summary.of(remote).divided(2);
                line("remote", c, "stampede remote (Java, JNI; serve, dataUntilClose())", m)
                        .field("ratio_vs", "stampede (Java, JNI; dataUntilClose())").field("ratio", m.p50 / u.p50)
                        .emit();
            }
        }
    }

    /** Round-trip times in ns of the ping-pong, A's side on {@code rtA}, B's on {@code rtB}. */
    static List<Long> pingPong(Runtime rtA, Runtime rtB, String prefix, int bytes, int warmup, int roundTrips,
            boolean untilClose) throws Exception {
        Channel ping = rtA.createChannel(prefix + "ping");
        Channel pong = rtA.createChannel(prefix + "pong");
        int total = warmup + roundTrips;
        // On a node ts_min is global and only grows: A starts above everything put before.
        long base = rtA.tsMin() == Stampede.INFINITY ? 0 : rtA.tsMin();
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try (Task a = rtA.task(base); ChannelOutput aOut = a.attachOutput(ping); ChannelInput aIn = a.attachInput(pong);
                Task b = rtB.task(Stampede.INFINITY); ChannelInput bIn = b.attachInput(rtB.channel(prefix + "ping"));
                ChannelOutput bOut = b.attachOutput(rtB.channel(prefix + "pong"))) {
            Future<?> echo = thread.submit(() -> {
                byte[] buf = source(bytes, 0xb0);
                for (int i = 0; i < total; i++) {
                    try (Item item = bIn.get(Selector.NEWEST_UNSEEN)) {
                        touch(item, untilClose);
                        bOut.put(item.ts(), buf);
                        bIn.consume(item.ts());
                    }
                }
                return null;
            });
            byte[] buf = source(bytes, 0xa0);
            List<Long> rtt = new ArrayList<>(roundTrips);
            for (int i = 0; i < total; i++) {
                long ts = base + i;
                long start = System.nanoTime();
                aOut.put(ts, buf);
                a.setVirtualTime(ts + 1);
                try (Item item = aIn.get(ts, null)) {
                    touch(item, untilClose);
                }
                aIn.consume(ts);
                long ns = System.nanoTime() - start;
                if (i >= warmup) {
                    rtt.add(ns);
                }
            }
            echo.get();
            if (ping.stats().liveItems() != 0 || pong.stats().liveItems() != 0) {
                throw new IllegalStateException("items left after the ping-pong: GC did not reclaim them");
            }
            return rtt;
        } finally {
            thread.shutdownNow();
        }
    }

    /** Round-trip times in ns of the same ping-pong over two {@code ArrayBlockingQueue(1)}s. */
    static List<Long> queuePingPong(int bytes, int warmup, int roundTrips) throws Exception {
        BlockingQueue<byte[]> ping = new ArrayBlockingQueue<>(1);
        BlockingQueue<byte[]> pong = new ArrayBlockingQueue<>(1);
        int total = warmup + roundTrips;
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try {
            Future<?> echo = thread.submit(() -> {
                byte[] buf = source(bytes, 0xb0);
                for (int i = 0; i < total; i++) {
                    touch(ping.take());
                    pong.put(buf.clone());
                }
                return null;
            });
            byte[] buf = source(bytes, 0xa0);
            List<Long> rtt = new ArrayList<>(roundTrips);
            for (int i = 0; i < total; i++) {
                long start = System.nanoTime();
                ping.put(buf.clone());
                touch(pong.take());
                long ns = System.nanoTime() - start;
                if (i >= warmup) {
                    rtt.add(ns);
                }
            }
            echo.get();
            return rtt;
        } finally {
            thread.shutdownNow();
        }
    }

    static volatile int sink;

    /** Reads the first and last byte through the item's buffer, so no receive can be optimised away. */
    static void touch(Item item, boolean untilClose) throws StampedeException {
        ByteBuffer data = untilClose ? item.dataUntilClose() : item.data();
        sink = data.limit() == 0 ? 0 : data.get(0) ^ data.get(data.limit() - 1);
    }

    static void touch(byte[] data) {
        sink = data[0] ^ data[data.length - 1];
    }

    static byte[] source(int bytes, int seed) {
        byte[] buf = new byte[bytes];
        for (int i = 0; i < bytes; i++) {
            buf[i] = (byte) (i + seed);
        }
        return buf;
    }

    /** Percentiles (nearest rank) and mean of samples in ns. */
    record Summary(long n, double p50, double p99, double mean) {
        static Summary of(List<Long> samples) {
            long[] s = samples.stream().mapToLong(Long::longValue).sorted().toArray();
            double mean = Arrays.stream(s).average().orElse(Double.NaN);
            return new Summary(s.length, percentile(s, 50), percentile(s, 99), mean);
        }

        static double percentile(long[] sorted, double p) {
            int rank = (int) Math.ceil(p / 100 * sorted.length);
            return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1];
        }

        Summary divided(double k) {
            return new Summary(n, p50 / k, p99 / k, mean / k);
        }
    }

    static Line line(String bench, String c, String subject, Summary s) {
        return new Line().field("bench", bench).field("case", c).field("impl", subject).field("p50_us", s.p50 / 1e3)
                .field("p99_us", s.p99 / 1e3).field("mean_us", s.mean / 1e3).field("round_trips", s.n);
    }

    /** One JSON result line, fields in the order added; floats rounded to 3 decimals. */
    static final class Line {
        private final Map<String, Object> fields = new LinkedHashMap<>();

        Line field(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        void emit() {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<String, Object> e : fields.entrySet()) {
                out.append(out.length() > 1 ? "," : "").append(json(e.getKey())).append(':');
                Object v = e.getValue();
                if (v instanceof Double d) {
                    out.append(Double.isFinite(d) ? Double.toString(Math.round(d * 1000) / 1000.0) : "null");
                } else if (v instanceof Number) {
                    out.append(v);
                } else {
                    out.append(json(String.valueOf(v)));
                }
            }
            System.out.println(out.append('}'));
        }

        private static String json(String s) {
            return '"' + s.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
        }
    }
}
