import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.zip.CRC32;

import org.stampede.Channel;
import org.stampede.ChannelInput;
import org.stampede.ChannelOptions;
import org.stampede.Item;
import org.stampede.NotAvailableException;
import org.stampede.NpyHeader;
import org.stampede.Runtime;
import org.stampede.Selector;
import org.stampede.StampedeException;
import org.stampede.Stampede;
import org.stampede.AlreadyExistsException;
import org.stampede.Task;

/**
 * A display written in Java: connects to a Stampede node and shows the freshest frame of a channel
 * ({@code NEWEST_UNSEEN}: stale frames are skipped, never queued), printing per frame its timestamp,
 * dtype, shape and the CRC-32 of its pixels, read in place (zero-copy) from the item's buffer.
 *
 * <p>Paired with the C camera ({@code c/examples/camera.c}: 320x240 {@code |u1} frames into
 * {@code camera/c}, row y of value y with a white bar 16 pixels wide at x = 4 ts mod 320), it also
 * checks each frame against that pattern. Either may start first. Run from the repository root
 * (docs/JAVA.md):
 *
 * <pre>
 * cargo run --release -p stampede-cli -- serve --listen tcp/127.0.0.1:7447
 * make -C c &amp;&amp; c/build/release/camera --connect tcp/127.0.0.1:7447 camera/c 300
 * java -cp java/target/classes -Dstampede.library.path=target/debug java/examples/Display.java \
 *     --connect tcp/127.0.0.1:7447 camera/c 100
 * </pre>
 *
 * Usage: {@code Display [--connect <endpoint>] [--timeout <s>] [<channel> [<frames>]]} — defaults
 * tcp/127.0.0.1:7447, 5 s (the display stops after this long without a frame), camera/c, 100.
 */
public final class Display {
    private static final int CAPACITY = 30; // as the C camera creates the channel
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

    public static void main(String[] args) throws Exception {
        String endpoint = "tcp/127.0.0.1:7447";
        String name = "camera/c";
        long frames = 100;
        Duration timeout = Duration.ofSeconds(5);
        int arg = 0;
        for (; arg + 1 < args.length && args[arg].startsWith("--"); arg += 2) {
            switch (args[arg]) {
                case "--connect" -> endpoint = args[arg + 1];
                case "--timeout" -> timeout = Duration.ofMillis((long) (Double.parseDouble(args[arg + 1]) * 1000));
                default -> usage();
            }
        }
        if (arg < args.length && !args[arg].startsWith("--")) {
            name = args[arg++];
        }
        if (arg < args.length) {
            frames = Long.parseLong(args[arg++]);
        }
        if (arg != args.length || frames <= 0) {
            usage();
        }
        try (Runtime rt = Stampede.connect(endpoint, CONNECT_TIMEOUT)) {
            show(rt, channel(rt, name), frames, timeout);
        } catch (StampedeException e) {
            System.err.println("display: " + e.getClass().getSimpleName() + ": " + e.getMessage());
            System.exit(1);
        }
    }

    private static void usage() {
        System.err.println("usage: Display [--connect <endpoint>] [--timeout <s>] [<channel> [<frames>]]");
        System.exit(2);
    }

    /** The frames channel on the node: created by whichever process comes first. */
    private static Channel channel(Runtime rt, String name) throws StampedeException {
        try {
            return rt.createChannel(name, ChannelOptions.DEFAULT.withCapacity(CAPACITY));
        } catch (AlreadyExistsException e) {
            return rt.channel(name);
        }
    }

    private static void show(Runtime rt, Channel channel, long frames, Duration timeout) throws StampedeException {
        System.out.printf("display: showing %d frames of %s on %s%n", frames, channel.name(),
                rt.node().orElse("this process"));
        long shown = 0;
        long skipped = 0;
        long damaged = 0;
        long last = -1;
        long started = System.nanoTime();
        // INFINITY: the display never puts; it inherits timestamps from the frames it holds.
        try (Task task = rt.task(Stampede.INFINITY); ChannelInput in = task.attachInput(channel)) {
            task.setName("java display");
            while (shown < frames) {
                try (Item item = in.get(Selector.NEWEST_UNSEEN, timeout)) {
                    NpyHeader header = item.npy();
                    ByteBuffer pixels = item.npyData(); // a read-only view of the node's bytes as received
                    CRC32 crc = new CRC32();
                    crc.update(pixels.duplicate());
                    String pattern = pattern(header, pixels, item.ts());
                    if (pattern.equals("differs")) {
                        damaged++;
                    }
                    System.out.printf("frame ts=%d dtype=%s shape=%s crc32=%08x pattern=%s%n", item.ts(),
                            header.descr(), header.shapeText(), crc.getValue(), pattern);
                    if (last >= 0 && item.ts() > last + 1) {
                        skipped += item.ts() - last - 1;
                    }
                    last = item.ts();
                    shown++;
                    in.consumeUntil(item.ts()); // this frame and every older one are garbage to us
                } catch (NotAvailableException e) {
                    System.out.printf("display: no frame for %.1f s, stopping%n", timeout.toMillis() / 1000.0);
                    break;
                }
            }
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.printf("display: %d frames shown, %d skipped, %d damaged, %.1f frames/s, ts_min %d%n", shown,
                skipped, damaged, shown / seconds, rt.tsMin());
        if (damaged > 0) {
            System.exit(1);
        }
    }

    /**
     * {@code ok} when the frame is the C camera's frame {@code ts} (320x240 |u1: row y of value y, a
     * white bar 16 wide at x = 4 ts mod 320), {@code differs} when it is not, {@code -} for another shape.
     */
    private static String pattern(NpyHeader header, ByteBuffer pixels, long ts) {
        long[] shape = header.shape();
        if (!header.descr().equals("|u1") || shape.length != 2 || shape[0] != 240 || shape[1] != 320) {
            return "-";
        }
        int bar = (int) ((4 * ts) % 320);
        for (int y = 0; y < 240; y++) {
            for (int x = 0; x < 320; x++) {
                int expected = x >= bar && x < bar + 16 ? 255 : y;
                if ((pixels.get(y * 320 + x) & 0xff) != expected) {
                    return "differs";
                }
            }
        }
        return "ok";
    }
}
