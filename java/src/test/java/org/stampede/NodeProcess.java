package org.stampede;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A {@code stampede serve} process on a Unix socket of its own, for the tests that run against a node
 * ({@code -Dstampede.serve=<path of the stampede binary>}, e.g. {@code target/debug/stampede} after
 * {@code cargo build -p stampede-cli}); killed and its directory removed on close.
 */
final class NodeProcess implements AutoCloseable {
    final String endpoint;
    private final Process process;
    private final Path dir;

    /** The binary {@code -Dstampede.serve} names, or null when the tests run embedded only. */
    static String binary() {
        String path = System.getProperty("stampede.serve");
        return path == null || path.isEmpty() ? null : path;
    }

    NodeProcess(String name) throws IOException {
        dir = Files.createTempDirectory("stampede-node");
        endpoint = "unixsock-stream/" + dir.resolve("node.sock");
        process = new ProcessBuilder(binary(), "serve", "--listen", endpoint, "--name", name)
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String said = out.readLine();
        if (said == null || !said.startsWith("listening on")) {
            close();
            throw new IllegalStateException("stampede serve said " + said);
        }
    }

    @Override
    public void close() throws IOException {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
