/**
 * Stampede's Java client: threads, processes and machines sharing time-indexed channels (Space-Time
 * Memory), over the Rust client through JNI ({@code crates/stampede-jni}). The API mirrors Python's
 * (docs/SEMANTICS.md, "The API in every language") in Java's conventions; docs/JAVA.md has the
 * whole story.
 *
 * <ul>
 *   <li>{@link org.stampede.Runtime} — embedded ({@code new Runtime()}) or a session on a node
 *       ({@link org.stampede.Stampede#connect}): names, tasks, ts_min, GC, stats.</li>
 *   <li>{@link org.stampede.Channel}, {@link org.stampede.Queue} — the containers;
 *       {@link org.stampede.Task} — virtual time; attaching gives {@link org.stampede.ChannelInput},
 *       {@link org.stampede.ChannelOutput}, {@link org.stampede.QueueInput},
 *       {@link org.stampede.QueueOutput}.</li>
 *   <li>{@link org.stampede.Item} — a gotten item: timestamp, codec, and its bytes as a read-only
 *       zero-copy {@link java.nio.ByteBuffer}; {@link org.stampede.Npy} reads and writes
 *       {@code .npy} headers.</li>
 *   <li>Errors are checked exceptions, one class per error type, all subclasses of
 *       {@link org.stampede.StampedeException}, with the Rust message text.</li>
 * </ul>
 *
 * <p>Conventions: timeouts are {@link java.time.Duration}s, null waits forever and
 * {@link java.time.Duration#ZERO} never waits; every class is thread-safe (a {@link org.stampede.Watch}
 * is read by one thread at a time); runtimes, tasks, connections, items and watches are
 * {@link java.lang.AutoCloseable}, and what is never closed is released when unreachable.
 */
package org.stampede;
