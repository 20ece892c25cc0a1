import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;

import org.stampede.Channel;
import org.stampede.ChannelInput;
import org.stampede.Item;
import org.stampede.Runtime;
import org.stampede.Selector;
import org.stampede.Stampede;
import org.stampede.Task;

/**
 * The Java side of the cross-language test ({@code python/tests/test_xlang.py}): reads the items
 * a C producer put into a channel on a node, in timestamp order, and prints one line per item —
 * {@code <ts> <codec> <sha256 of the bytes>}, then for text codecs the text and for {@code npy} the
 * dtype, the shape and the elements — for the test to compare with what it expects.
 *
 * <pre>
 * java -cp java/target/classes -Dstampede.library.path=target/debug java/examples/XlangConsumer.java \
 *     --connect &lt;endpoint&gt; &lt;channel&gt; &lt;items&gt;
 * </pre>
 */
public final class XlangConsumer {
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !args[0].equals("--connect")) {
            System.err.println("usage: XlangConsumer --connect <endpoint> <channel> <items>");
            System.exit(2);
        }
        try (Runtime rt = Stampede.connect(args[1], TIMEOUT);
             Task task = rt.task(rt.tsMin());
             ChannelInput in = task.attachInput(rt.channel(args[2]))) {
            for (int i = 0; i < Integer.parseInt(args[3]); i++) {
                try (Item item = in.get(Selector.OLDEST_UNSEEN, TIMEOUT)) {
                    byte[] bytes = item.bytes();
                    String digest = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
                    StringBuilder line = new StringBuilder(item.ts() + " " + item.codec() + " " + digest);
                    switch (item.codec()) {
                        case "utf8", "json" -> line.append(" ").append(item.text());
                        case "npy" -> {
                            var header = item.npy();
                            var data = item.npyData();
                            line.append(" ").append(header.descr()).append(" ").append(header.shapeText());
                            while (data.hasRemaining()) {
                                line.append(" ").append(Byte.toUnsignedInt(data.get()));
                            }
                        }
                        default -> { }
                    }
                    System.out.println(line);
                    in.consume(item.ts());
                }
            }
        }
    }
}
