package org.stampede;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * What the name service tells of a channel or queue (docs/NODES.md, "The name service").
 *
 * @param name its name
 * @param kind {@code "channel"} or {@code "queue"}
 * @param node the node it lives on (empty: this process's embedded runtime)
 * @param capacity its bound on items, if any
 * @param maxBytes its bound on payload bytes, if any
 * @param codec the codec its payloads must have, if it declares one
 * @param description what it carries, for people
 */
public record Info(String name, String kind, Optional<String> node, OptionalLong capacity, OptionalLong maxBytes,
        Optional<String> codec, String description) {

    static Info of(String[] fields, long[] limits) {
        return new Info(fields[0], fields[1], Optional.ofNullable(fields[2]), optional(limits[0]),
                optional(limits[1]), Optional.ofNullable(fields[3]), fields[4] == null ? "" : fields[4]);
    }

    static OptionalLong optional(long value) {
        return value < 0 ? OptionalLong.empty() : OptionalLong.of(value);
    }
}
