package org.stampede;

import java.nio.file.Path;
import java.time.Duration;

/**
 * How {@link Stampede#connect(String, ConnectOptions)} reaches a node: how long to try, the node to
 * open the session on (through the mesh), the user (on a node with an access policy), TLS files for a
 * {@code tls/} endpoint (docs/SECURITY.md), and the prefetch policy of the client's channel inputs that
 * choose none (docs/PREFETCH.md). Immutable: each {@code with...} returns a new value.
 */
public final class ConnectOptions {
    /** Try as long as it takes, the node at the endpoint, no user, no TLS files, prefetch {@code AUTO}. */
    public static final ConnectOptions DEFAULT = new ConnectOptions(null, null, null, null, null, null, null, null);

    final Duration timeout;
    final String node;
    final String user;
    final String password;
    final Path rootCa;
    final Path certificate;
    final Path privateKey;
    final Prefetch prefetch;

    private ConnectOptions(Duration timeout, String node, String user, String password, Path rootCa,
            Path certificate, Path privateKey, Prefetch prefetch) {
        this.timeout = timeout;
        this.node = node;
        this.user = user;
        this.password = password;
        this.rootCa = rootCa;
        this.certificate = certificate;
        this.privateKey = privateKey;
        this.prefetch = prefetch;
    }

    /** How long to keep trying to reach the node (null: as long as it takes). */
    public ConnectOptions withTimeout(Duration timeout) {
        return new ConnectOptions(timeout, node, user, password, rootCa, certificate, privateKey, prefetch);
    }

    /** The node to open the session on, reached through the one at the endpoint and its mesh. */
    public ConnectOptions withNode(String node) {
        return new ConnectOptions(timeout, node, user, password, rootCa, certificate, privateKey, prefetch);
    }

    /** The user and password to open the session as. */
    public ConnectOptions withUser(String user, String password) {
        return new ConnectOptions(timeout, node, user, password, rootCa, certificate, privateKey, prefetch);
    }

    /**
     * TLS files (PEM) for a {@code tls/<host>:<port>} endpoint: the CA that signed the node's certificate,
     * and the client's certificate and key for mutual TLS (each may be null).
     */
    public ConnectOptions withTls(Path rootCa, Path certificate, Path privateKey) {
        return new ConnectOptions(timeout, node, user, password, rootCa, certificate, privateKey, prefetch);
    }

    /**
     * The prefetch policy of this client's channel inputs that attach without one (null: {@code AUTO});
     * an input's own {@link InputOptions#withPrefetch} still wins.
     */
    public ConnectOptions withPrefetch(Prefetch prefetch) {
        return new ConnectOptions(timeout, node, user, password, rootCa, certificate, privateKey, prefetch);
    }
}
