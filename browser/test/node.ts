// A fresh `stampede serve` node with a WebSocket endpoint, for the tests: started here, stopped by
// the test that started it. The binary is $STAMPEDE_BIN, else the repository's debug build
// (`cargo build -p stampede-cli`).

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const STAMPEDE_BIN =
  process.env["STAMPEDE_BIN"] ?? fileURLToPath(new URL("../../../target/debug/stampede", import.meta.url));

/** How long a node has to say where it listens. */
const START_MS = 20_000;

export interface TestNode {
  /** The WebSocket endpoint, `ws://127.0.0.1:<port>` (`wss://` on a node with TLS). */
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts a node on loopback (a free Unix socket for zenoh, a free port for the WebSocket). */
export async function startNode(extra: string[] = []): Promise<TestNode> {
  if (!existsSync(STAMPEDE_BIN)) {
    throw new Error(`no stampede binary at ${STAMPEDE_BIN}: run cargo build -p stampede-cli (or set STAMPEDE_BIN)`);
  }
  const socket = `/tmp/stampede-browser-test-${process.pid}-${Math.random().toString(16).slice(2)}.sock`;
  const child = spawn(
    STAMPEDE_BIN,
    ["serve", "--listen", `unixsock-stream/${socket}`, "--websocket", "0", "--liveliness-timeout", "2", ...extra],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => reject(new Error(`the node did not start in ${START_MS} ms: ${stderr}`)), START_MS);
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const found = /websocket on (wss?:\/\/\S+)/.exec(stdout);
      if (found?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the node exited (${code}): ${stderr}`));
    });
  });
  return {
    url,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        // A node killed by a signal has no exit code, only a signal: either means it is gone.
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.on("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
