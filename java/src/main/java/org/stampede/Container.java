package org.stampede;

import java.util.OptionalLong;

/** A channel or a queue: what {@link Runtime#lookup} returns and a task attaches to. */
public sealed interface Container permits Channel, Queue {
    /** Its name. */
    String name();

    /** Its bound on items, if any. */
    OptionalLong capacity();

    /** Its bound on payload bytes, if any. */
    OptionalLong maxBytes();

    /** Its counters now. */
    Stats stats();

    /** What the name service tells of it. */
    Info info();

    /** Sets (or, with null, removes) its GC handler, replacing the previous one. */
    void onReclaim(ReclaimHandler handler) throws StampedeException;

    /** Destroys it: its items are reclaimed, its name freed, every operation on it fails {@code Closed}. */
    void destroy() throws StampedeException;
}
