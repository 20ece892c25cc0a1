package org.stampede;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * One event of a {@link Watch}.
 *
 * @param kind what happened: {@code "created"}, {@code "destroyed"}, {@code "node_up"},
 *     {@code "node_down"} or {@code "lagged"}
 * @param name the channel or queue (created, destroyed)
 * @param containerKind {@code "channel"} or {@code "queue"} (created, destroyed)
 * @param node where it lives, or the node that came up or went down
 * @param missed how many changes the watcher missed (lagged; {@link Runtime#names} tells the present)
 */
public record WatchEvent(String kind, Optional<String> name, Optional<String> containerKind, Optional<String> node,
        OptionalLong missed) {

    /** From the native layer's fields, in this order: kind, name, container kind, node, missed. */
    static WatchEvent of(String[] f) {
        return new WatchEvent(f[0], Optional.ofNullable(f[1]), Optional.ofNullable(f[2]), Optional.ofNullable(f[3]),
                f[4] == null ? OptionalLong.empty() : OptionalLong.of(Long.parseLong(f[4])));
    }
}
