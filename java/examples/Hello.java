import org.stampede.*;
import org.stampede.Runtime; // a single-type import: java.lang.Runtime has the same simple name

/** The README's 15 lines, in Java: a camera task puts ten frames, a tracker reads the freshest. */
public final class Hello {
    public static void main(String[] args) throws StampedeException {
        try (Runtime rt = new Runtime()) {
            Channel frames = rt.createChannel("camera/frames");
            try (Task camera = rt.task(0);                            // virtual time = frame number
                 Task tracker = rt.task(Stampede.INFINITY);           // inherits timestamps from what it gets
                 ChannelOutput out = camera.attachOutput(frames);
                 ChannelInput in = tracker.attachInput(frames)) {
                for (long ts = 0; ts < 10; ts++) {
                    out.put(ts, "frame " + ts);
                    camera.setVirtualTime(ts + 1);
                }
                try (Item item = in.get(Selector.NEWEST_UNSEEN)) {    // the freshest frame, skipping the rest
                    System.out.println(item.ts() + " " + item.text());    // 9 frame 9
                    in.consumeUntil(item.ts());                       // frames 0..9 are garbage to the tracker
                }
                System.out.println(rt.tsMin() + " " + frames.stats().liveItems());   // 10 0 — reclaimed already
            }
        }
    }
}
