// The browser client over `wss://` on a node with TLS: the node's WebSocket endpoint presents the
// node's certificate (made here by `stampede certs`), a client that trusts its CA gets through and
// one that does not is `Unreachable`. Node.js reads extra trusted CAs only at start
// (`NODE_EXTRA_CA_CERTS`), so each client runs in a process of its own.

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { startNode, STAMPEDE_BIN, type TestNode } from "./node.js";

let node: TestNode;
let dir: string;

/** A TCP port free on 127.0.0.1 now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === "object" && address !== null ? address.port : 0;
}

/** A client in a process of its own: puts and gets one item over `url`, prints what it got. */
const CLIENT = `
import { connect, INFINITY } from ${JSON.stringify(new URL("../src/index.js", import.meta.url).href)};
const rt = await connect(process.argv[2], { timeoutMs: 5000 });
const channel = await rt.createChannel("tls/check");
const base = await rt.tsMin();
const input = await (await rt.task(INFINITY)).attachInput(channel);
await (await (await rt.task(base)).attachOutput(channel)).put(base, "over wss");
console.log((await input.get(base)).text());
await rt.close();
`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "stampede-browser-tls-"));
  execFileSync(STAMPEDE_BIN, ["certs", "--out", dir, "--node", "a=127.0.0.1,localhost"]);
  writeFileSync(join(dir, "client.mjs"), CLIENT);
  const tls = [`--listen`, `tls/127.0.0.1:${await freePort()}`];
  node = await startNode([...tls, "--tls-certificate", join(dir, "a.pem"), "--tls-private-key", join(dir, "a.key")]);
});

after(async () => {
  await node.stop();
  rmSync(dir, { recursive: true, force: true });
});

function client(env: Record<string, string>): { status: number | null; out: string } {
  // The flag that gives Node 20 its WebSocket, if this process was given it.
  const flags = process.execArgv.filter((flag) => flag === "--experimental-websocket");
  const run = spawnSync(process.execPath, [...flags, join(dir, "client.mjs"), node.url], {
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { status: run.status, out: run.stdout + run.stderr };
}

test("a node with TLS serves wss:// to a client that trusts its CA", () => {
  assert.match(node.url, /^wss:\/\//);
  const trusted = client({ NODE_EXTRA_CA_CERTS: join(dir, "ca.pem") });
  assert.equal(trusted.status, 0, trusted.out);
  assert.match(trusted.out, /over wss/);
});

test("a client that does not trust the node's CA is Unreachable", () => {
  const untrusted = client({ NODE_EXTRA_CA_CERTS: "" });
  assert.notEqual(untrusted.status, 0);
  assert.match(untrusted.out, /Unreachable|unreachable/);
});
