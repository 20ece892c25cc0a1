package org.stampede;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared test vectors ({@code tests/vectors/*.vectors}, format in {@code tests/vectors/README.md})
 * run by the Java client: the same cases the Rust, Python and C suites run, so the four agree. Each
 * case is one dynamic test on a fresh runtime, and fails naming its first line whose outcome differs.
 *
 * <p>Configurations (system properties, passed through by Maven's {@code -D}):
 * <ul>
 *   <li>default: a fresh embedded runtime per case;</li>
 *   <li>{@code -Dstampede.serve=<path of the stampede binary>}: a fresh {@code stampede serve}
 *       process per case (on a Unix socket), and a client session on it — the conformance
 *       configuration {@code serve} of the Rust and Python suites;</li>
 *   <li>{@code -Dstampede.vectors.node=<endpoint>}: a fresh session per case on one shared node, with
 *       container names under {@code vectors/<run>/<case>/}. ts_min is global and monotone on a node, so
 *       each case's timestamps are shifted up by the node's ts_min when it starts (and shown shifted
 *       back); a node that other clients use at the same time may still disagree on ts_min.</li>
 * </ul>
 * The vectors' directory is {@code -Dstampede.vectors.dir} (the pom sets it), else
 * {@code ../tests/vectors}.
 */
class VectorsTest {
    private static final Duration NODE_START = Duration.ofSeconds(30);

    /** One case: where it comes from and its operation lines with their numbers. */
    private record Case(String name, List<Integer> numbers, List<String> lines) {}

    private static Path vectorsDir() {
        return Path.of(System.getProperty("stampede.vectors.dir", "../tests/vectors"));
    }

    private static List<Path> files() throws IOException {
        try (Stream<Path> paths = Files.list(vectorsDir())) {
            return paths.filter(p -> p.toString().endsWith(".vectors")).sorted().collect(Collectors.toList());
        }
    }

    private static List<Case> cases(Path file) throws IOException {
        List<Case> cases = new ArrayList<>();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        String stem = file.getFileName().toString().replaceFirst("\\.vectors$", "");
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            int hash = line.indexOf('#');
            line = (hash >= 0 ? line.substring(0, hash) : line).strip();
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("case ")) {
                cases.add(new Case(stem + ":" + line.substring(5).strip(), new ArrayList<>(), new ArrayList<>()));
            } else if (cases.isEmpty()) {
                throw new IllegalStateException(file + " line " + (i + 1) + ": an operation before the first case");
            } else {
                cases.get(cases.size() - 1).numbers().add(i + 1);
                cases.get(cases.size() - 1).lines().add(line);
            }
        }
        return cases;
    }

    /** The vectors exist: a runner that finds none proves nothing. */
    @Test
    void vectorsArePresent() throws IOException {
        assertFalse(files().isEmpty(), "no .vectors files in " + vectorsDir().toAbsolutePath());
    }

    /** Every case of every vectors file gives the expected outcome of every operation. */
    @TestFactory
    Stream<DynamicTest> sharedVectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        String run = "j" + ProcessHandle.current().pid() + "-" + System.nanoTime() % 1_000_000;
        for (Path file : files()) {
            for (Case c : cases(file)) {
                tests.add(DynamicTest.dynamicTest(c.name(), () -> runCase(c, run)));
            }
        }
        return tests.stream();
    }

    // ---- configurations ---------------------------------------------------------------------

    /** A runtime of the configuration in force, the node it is a client of (if any), and the prefix. */
    private record Setup(Runtime runtime, NodeProcess node, String prefix) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            runtime.close();
            if (node != null) {
                node.close();
            }
        }
    }

    private static Setup setup(Case c, String run) throws Exception {
        String node = System.getProperty("stampede.vectors.node");
        if (NodeProcess.binary() != null) {
            NodeProcess process = new NodeProcess("conformance");
            try {
                return new Setup(Stampede.connect(process.endpoint, NODE_START), process, "");
            } catch (StampedeException e) {
                process.close();
                throw e;
            }
        }
        if (node != null && !node.isEmpty()) {
            String prefix = "vectors/" + run + "/" + c.name().replaceAll("[^A-Za-z0-9_.:-]", "_") + "/";
            return new Setup(Stampede.connect(node, NODE_START), null, prefix);
        }
        return new Setup(new Runtime(), null, "");
    }

    // ---- the interpreter --------------------------------------------------------------------

    private static void runCase(Case c, String run) throws Exception {
        try (Setup setup = setup(c, run)) {
            // On a shared node ts_min is global and monotone: the case's timestamps start at the node's
            // ts_min (base), and what it shows is relative to it again.
            long base = setup.prefix().isEmpty() ? 0 : setup.runtime().tsMin();
            Interpreter interpreter = new Interpreter(setup.runtime(), setup.prefix(), base);
            try {
                for (int i = 0; i < c.lines().size(); i++) {
                    String line = c.lines().get(i);
                    int arrow = line.indexOf(" -> ");
                    if (arrow < 0) {
                        fail("line " + c.numbers().get(i) + ": no \" -> \"");
                    }
                    String op = line.substring(0, arrow);
                    String expected = line.substring(arrow + 4);
                    String got = interpreter.run(op, c.numbers().get(i));
                    if (!got.equals(normalise(expected))) {
                        fail("line " + c.numbers().get(i) + ": `" + op + "` gave `" + got + "`, expected `" + expected
                                + "`");
                    }
                }
            } finally {
                interpreter.close();
            }
        }
    }

    /** An operation's outcome, written as the vectors write expected values. */
    @FunctionalInterface
    private interface Outcome {
        String get() throws StampedeException;
    }

    private static String outcome(Outcome op) {
        try {
            return op.get();
        } catch (StampedeException e) {
            return errorName(e);
        }
    }

    /** An exception's error type as Python names it: {@code BelowVisibilityException} → {@code BelowVisibility}. */
    static String errorName(StampedeException e) {
        return e.getClass().getSimpleName().replaceFirst("Exception$", "");
    }

    private static final class Interpreter {
        private final Runtime rt;
        private final String prefix;
        private final Map<String, Task> tasks = new HashMap<>();
        private final Map<String, Connection> conns = new HashMap<>();
        private final Map<String, Map<Long, Item>> held = new HashMap<>();
        /** Added to every valid timestamp of the case, subtracted from every one shown. */
        private final long base;

        Interpreter(Runtime rt, String prefix, long base) {
            this.rt = rt;
            this.prefix = prefix;
            this.base = base;
        }

        /** A timestamp or virtual time of the case on this runtime: shifted by the base, except
         * negative ones and INFINITY (invalid or special either way). */
        private long ts(String token) {
            long ts = timestamp(token);
            return ts < 0 || ts == Stampede.INFINITY ? ts : ts + base;
        }

        private String showItem(Item item) throws StampedeException {
            return VectorsTest.showItem(item.ts() - base, item.codec(), item.data());
        }

        void close() {
            held.values().forEach(items -> items.values().forEach(Item::close));
        }

        private Task task(String name, int number) {
            Task task = tasks.get(name);
            if (task == null) {
                throw new IllegalStateException("line " + number + ": no task " + name);
            }
            return task;
        }

        private <T extends Connection> T conn(String name, Class<T> kind, int number) {
            Connection conn = conns.get(name);
            if (!kind.isInstance(conn)) {
                throw new IllegalStateException("line " + number + ": " + name + " is not a " + kind.getSimpleName());
            }
            return kind.cast(conn);
        }

        String run(String op, int number) {
            String[] t = op.split(" ");
            switch (t[0]) {
                case "channel":
                    return outcome(() -> {
                        ChannelOptions options = ChannelOptions.DEFAULT;
                        if (!t[2].equals("-")) {
                            options = options.withCapacity(Long.parseLong(t[2]));
                        }
                        rt.createChannel(prefix + t[1], options);
                        return "ok";
                    });
                case "queue":
                    return outcome(() -> {
                        QueueOptions options = QueueOptions.DEFAULT;
                        if (!t[2].equals("-")) {
                            options = options.withCapacity(Long.parseLong(t[2]));
                        }
                        rt.createQueue(prefix + t[1], options);
                        return "ok";
                    });
                case "task":
                    return outcome(() -> {
                        tasks.put(t[1], rt.task(ts(t[2])));
                        return "ok";
                    });
                case "vt":
                    return outcome(() -> {
                        task(t[1], number).setVirtualTime(ts(t[2]));
                        return "ok";
                    });
                case "close":
                    task(t[1], number).close();
                    return "ok";
                case "in":
                case "out":
                    return outcome(() -> {
                        Container container = rt.lookup(prefix + t[3]);
                        Task task = task(t[2], number);
                        boolean input = t[0].equals("in");
                        Connection conn;
                        if (container instanceof Channel ch) {
                            conn = input ? task.attachInput(ch) : task.attachOutput(ch);
                        } else {
                            Queue q = (Queue) container;
                            conn = input ? task.attachInput(q) : task.attachOutput(q);
                        }
                        conns.put(t[1], conn);
                        return "ok";
                    });
                case "detach":
                    conns.get(t[1]).detach();
                    return "ok";
                case "put":
                case "tryput":
                case "putref":
                    return outcome(() -> {
                        PutOptions options = PutOptions.DEFAULT.withCodec(t[3]);
                        if (t[0].equals("tryput")) {
                            options = options.withTimeout(Duration.ZERO);
                        }
                        if (t[0].equals("putref")) {
                            options = options.withRefcount(Integer.parseInt(t[5]));
                        }
                        byte[] data = payload(t[4]);
                        long ts = ts(t[2]);
                        Connection conn = conns.get(t[1]);
                        if (conn instanceof ChannelOutput out) {
                            out.put(ts, data, options);
                        } else if (conn instanceof QueueOutput out) {
                            out.put(ts, data, options);
                        } else {
                            throw new IllegalStateException("line " + number + ": " + t[1] + " is not an output");
                        }
                        return "ok";
                    });
                case "get":
                    return outcome(() -> {
                        ChannelInput in = conn(t[1], ChannelInput.class, number);
                        try (Item item = in.get(selector(t[2], this::ts), Duration.ofMillis(Long.parseLong(t[3])))) {
                            return showItem(item);
                        }
                    });
                case "qget":
                    return outcome(() -> {
                        QueueInput in = conn(t[1], QueueInput.class, number);
                        Item item = in.get(Duration.ofMillis(Long.parseLong(t[2])));
                        held.computeIfAbsent(t[1], k -> new HashMap<>()).put(item.ts() - base, item);
                        return showItem(item);
                    });
                case "consume":
                    return outcome(() -> {
                        conn(t[1], ChannelInput.class, number).consume(ts(t[2]));
                        return "ok";
                    });
                case "qconsume":
                    return outcome(() -> {
                        QueueInput in = conn(t[1], QueueInput.class, number);
                        Item item = held.getOrDefault(t[1], Map.of()).remove(timestamp(t[2]));
                        if (item == null) {
                            throw new IllegalStateException("line " + number + ": nothing gotten at " + t[2]);
                        }
                        try (item) {
                            in.consume(item);
                        }
                        return "ok";
                    });
                case "until":
                    return outcome(() -> {
                        conn(t[1], ChannelInput.class, number).consumeUntil(ts(t[2]));
                        return "ok";
                    });
                case "range":
                    return outcome(() -> {
                        List<Item> items = conn(t[1], ChannelInput.class, number).getRange(ts(t[2]), ts(t[3]));
                        List<String> list = new ArrayList<>();
                        for (Item item : items) {
                            list.add(Long.toString(item.ts() - base));
                            item.close();
                        }
                        return "items " + (list.isEmpty() ? "-" : String.join(",", list));
                    });
                case "destroy":
                    return outcome(() -> {
                        rt.lookup(prefix + t[1]).destroy();
                        return "ok";
                    });
                case "lookup":
                    return outcome(() -> {
                        rt.lookup(prefix + t[1]);
                        return "ok";
                    });
                case "ts_min":
                    long tsMin = rt.tsMin();
                    return show(tsMin == Stampede.INFINITY ? tsMin : tsMin - base);
                case "live":
                    return outcome(() -> Long.toString(rt.lookup(prefix + t[1]).stats().liveItems()));
                case "npy":
                    return outcome(() -> {
                        NpyHeader header = Npy.header(payload(t[1]));
                        return "npy " + header.descr() + " " + header.shapeText();
                    });
                default:
                    throw new IllegalStateException("line " + number + ": unknown operation `" + op
                            + "` (the vectors and the runners change together)");
            }
        }
    }

    private static long timestamp(String token) {
        return token.equals("inf") ? Stampede.INFINITY : Long.parseLong(token);
    }

    private static String show(long ts) {
        return ts == Stampede.INFINITY ? "inf" : Long.toString(ts);
    }

    private static Selector selector(String token, java.util.function.ToLongFunction<String> ts) {
        switch (token) {
            case "oldest":
                return Selector.OLDEST;
            case "newest":
                return Selector.NEWEST;
            case "oldest_unseen":
                return Selector.OLDEST_UNSEEN;
            case "newest_unseen":
                return Selector.NEWEST_UNSEEN;
            default:
                return Selector.at(ts.applyAsLong(token));
        }
    }

    /** A payload token: {@code -}, {@code text:<percent-encoded>} or {@code hex:<bytes>}. */
    static byte[] payload(String token) {
        if (token.equals("-")) {
            return new byte[0];
        }
        if (token.startsWith("hex:")) {
            String hex = token.substring(4);
            byte[] bytes = new byte[hex.length() / 2];
            for (int i = 0; i < bytes.length; i++) {
                bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
            return bytes;
        }
        if (!token.startsWith("text:")) {
            throw new IllegalArgumentException("payload " + token);
        }
        byte[] text = token.substring(5).getBytes(StandardCharsets.UTF_8);
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < text.length; i++) {
            if (text[i] == '%') {
                out.write(Integer.parseInt(new String(text, i + 1, 2, StandardCharsets.US_ASCII), 16));
                i += 2;
            } else {
                out.write(text[i]);
            }
        }
        return out.toByteArray();
    }

    /** An item as the vectors write it, its payload as {@code hex:} (or {@code -}). */
    private static String showItem(long ts, String codec, java.nio.ByteBuffer data) {
        StringBuilder hex = new StringBuilder();
        while (data.hasRemaining()) {
            hex.append(String.format("%02x", data.get() & 0xff));
        }
        return "item " + ts + " " + codec + " " + (hex.length() == 0 ? "-" : "hex:" + hex);
    }

    /** The expected value with its payload as {@code hex:}, so {@code text:} and {@code hex:} compare. */
    private static String normalise(String expected) {
        String[] t = expected.split(" ");
        if (t.length == 4 && t[0].equals("item")) {
            return showItem(Long.parseLong(t[1]), t[2], java.nio.ByteBuffer.wrap(payload(t[3])));
        }
        return expected;
    }
}
