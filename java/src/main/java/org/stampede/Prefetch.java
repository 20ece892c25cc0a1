package org.stampede;

/**
 * What a node pushes ahead of a remote channel input's gets (docs/PREFETCH.md): nothing
 * ({@link #OFF}), the newest item ({@link #NEWEST}: a reader that skips to the freshest frame), or
 * what the connection's tape shows ({@link #AUTO}, the default). An embedded runtime shares memory
 * with its producers: there is nothing to push.
 */
public enum Prefetch {
    OFF,
    NEWEST,
    AUTO;

    /** The policy's name, as every client language spells it: {@code off}, {@code newest}, {@code auto}. */
    String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
