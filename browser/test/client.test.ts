// The browser client against a real node, in Node.js (its WebSocket is the browser's API): the
// operations, a blocking get woken by a put, an aborted get that loses nothing, errors with the
// node's text, .npy arrays, queues, ts_min held and released by the session, and hostile
// messages refused with typed errors while the node stays up.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { connect, INFINITY, StampedeError, type Runtime } from "../src/index.js";
import { startNode, type TestNode } from "./node.js";

let node: TestNode;

before(async () => {
  node = await startNode();
});

after(async () => {
  await node.stop();
});

/** Runs `body` in a fresh session, given the node's ts_min when it starts: the tests share one
 * node, whose ts_min rises with every test's puts, so each puts at and above it. */
async function withRuntime(body: (rt: Runtime, base: bigint) => Promise<void>): Promise<void> {
  const rt = await connect(node.url);
  try {
    await body(rt, await rt.tsMin());
  } finally {
    await rt.close();
  }
}

test("put, get by every selector, range, consume: the embedded rules through a node", async () => {
  await withRuntime(async (rt) => {
    const frames = await rt.createChannel("browser/frames");
    const producer = await rt.task(0);
    const reader = await rt.task(INFINITY);
    const out = await producer.attachOutput(frames);
    const inp = await reader.attachInput(frames);
    await out.put(1, "one");
    await out.put(2n, new Uint8Array([1, 2, 3]));
    await out.put(3, { box: [1, 2, 3, 4] });
    const one = await inp.get(1);
    assert.deepEqual([one.ts, one.codec, one.text()], [1n, "utf8", "one"]);
    const newest = await inp.get("newest_unseen");
    assert.deepEqual([newest.ts, newest.codec, newest.json()], [3n, "json", { box: [1, 2, 3, 4] }]);
    const range = await inp.getRange(0, 10);
    assert.deepEqual(
      range.map((i) => i.ts),
      [1n, 2n, 3n],
    );
    assert.deepEqual(Array.from(range[1]?.bytes ?? []), [1, 2, 3]);
    await inp.consume(1);
    await assert.rejects(inp.get(1), (e: unknown) => e instanceof StampedeError && e.kind === "AlreadyConsumed");
    await inp.consumeUntil(3);
    assert.deepEqual(await rt.names("browser"), ["browser/frames"]);
    const stats = await frames.stats();
    assert.equal(stats.puts, 3);
  });
});

test("a blocking get is woken by a put from another session", async () => {
  await withRuntime(async (rt, base) => {
    const channel = await rt.createChannel("browser/wake");
    const inp = await (await rt.task(INFINITY)).attachInput(channel);
    const waiting = inp.get("newest_unseen", { timeoutMs: 10_000 });
    const other = await connect(node.url);
    const out = await (await other.task(base)).attachOutput((await other.lookup("browser/wake")) as never);
    await out.put(base + 7n, "late");
    const item = await waiting;
    assert.equal(item.ts, base + 7n);
    await other.close();
  });
});

test("an aborted get rejects with the signal's reason and loses nothing", async () => {
  await withRuntime(async (rt, base) => {
    const channel = await rt.createChannel("browser/abort");
    const inp = await (await rt.task(INFINITY)).attachInput(channel);
    const out = await (await rt.task(base)).attachOutput(channel);
    const controller = new AbortController();
    const waiting = inp.get("oldest_unseen", { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(waiting, (e: unknown) => e instanceof DOMException && e.name === "AbortError");
    await out.put(base + 5n, "kept");
    const item = await inp.get("oldest_unseen", { timeoutMs: 2000 });
    assert.equal(item.text(), "kept", "the item the aborted get did not take is the next get's");
  });
});

test("an aborted call is not sent, and an aborted put stores nothing", async () => {
  await withRuntime(async (rt, base) => {
    const aborted = AbortSignal.abort();
    const isAbort = (e: unknown) => e instanceof DOMException && e.name === "AbortError";
    await assert.rejects(rt.createChannel("browser/never", { signal: aborted }), isAbort);
    await assert.rejects(rt.lookup("browser/never"), (e: unknown) => e instanceof StampedeError && e.kind === "NotFound");
    await assert.rejects(rt.task(base, { signal: aborted }), isAbort);
    const full = await rt.createChannel("browser/full", { capacity: 1 });
    const producer = await rt.task(base);
    const out = await producer.attachOutput(full);
    const inp = await (await rt.task(INFINITY)).attachInput(full);
    await out.put(base + 1n, "first");
    const controller = new AbortController();
    const waiting = out.put(base + 2n, "second", { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(waiting, isAbort);
    await inp.consume(base + 1n);
    await producer.setVirtualTime(base + 2n); // the consumed item is reclaimed: room again
    await assert.rejects(inp.get(base + 2n, { timeoutMs: 300 }), (e: unknown) => e instanceof StampedeError && e.kind === "NotAvailable");
    await out.put(base + 2n, "again", { timeoutMs: 2000 });
    assert.equal((await inp.get(base + 2n)).text(), "again", "the aborted put left nothing at its timestamp");
  });
});

test("a timed-out get is NotAvailable with the node's text and neighbours", async () => {
  await withRuntime(async (rt, base) => {
    const channel = await rt.createChannel("browser/empty");
    const inp = await (await rt.task(INFINITY)).attachInput(channel);
    const started = Date.now();
    await assert.rejects(inp.get(base + 4n, { timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof StampedeError);
      assert.equal(e.kind, "NotAvailable");
      assert.match(e.message, /browser\/empty/);
      return true;
    });
    assert.ok(Date.now() - started >= 300, "waited its timeout");
    await assert.rejects(rt.lookup("browser/none"), (e: unknown) => e instanceof StampedeError && e.kind === "NotFound");
    await assert.rejects(rt.createChannel("browser/empty"), /already exists/);
  });
});

test("typed arrays travel as .npy and come back typed with their shape", async () => {
  await withRuntime(async (rt, base) => {
    const channel = await rt.createChannel("browser/npy");
    const out = await (await rt.task(base)).attachOutput(channel);
    const inp = await (await rt.task(INFINITY)).attachInput(channel);
    await out.put(base, { data: new Float32Array([1.5, 2.5, 3.5, 4.5, 5.5, 6.5]), shape: [2, 3] });
    const array = (await inp.get(base)).array();
    assert.deepEqual([array.dtype, array.shape, array.typed], ["<f4", [2, 3], true]);
    assert.ok(array.data instanceof Float32Array);
    assert.deepEqual(Array.from(array.data), [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);
  });
});

test("a queue hands each item to one getter", async () => {
  await withRuntime(async (rt, base) => {
    const queue = await rt.createQueue("browser/work");
    const out = await (await rt.task(base)).attachQueueOutput(queue);
    const worker = await rt.task(INFINITY);
    const a = await worker.attachQueueInput(queue);
    const b = await worker.attachQueueInput(queue);
    await out.put(base + 1n, "job 1");
    await out.put(base + 2n, "job 2");
    const first = await a.get({ timeoutMs: 1000 });
    const second = await b.get({ timeoutMs: 1000 });
    assert.deepEqual([first.text(), second.text()], ["job 1", "job 2"]);
    await a.consume(first);
    await b.consume(second.ts);
    await assert.rejects(a.get({ timeoutMs: 0 }), (e: unknown) => e instanceof StampedeError && e.kind === "NotAvailable");
  });
});

test("a session holds ts_min with its tasks and gives it back when it closes", async () => {
  const observer = await connect(node.url);
  const base = await observer.tsMin();
  // Items up to base + 300, so that ts_min may rise that far once nothing holds it.
  const channel = await observer.createChannel("browser/held");
  const producer = await observer.task(base);
  const out = await producer.attachOutput(channel);
  await out.put(base + 300n, "far");
  const rt = await connect(node.url);
  const task = await rt.task(base + 100n);
  await producer.close();
  assert.equal(await observer.tsMin(), base + 100n, "the browser's task holds ts_min");
  await task.setVirtualTime(base + 200n);
  assert.deepEqual(await task.times(), { virtualTime: base + 200n, visibility: base + 200n });
  assert.equal(await observer.tsMin(), base + 200n);
  await rt.close();
  assert.equal(await observer.tsMin(), base + 301n, "closed, the session holds nothing");
  await assert.rejects(task.close(), (e: unknown) => e instanceof StampedeError && e.kind === "Unreachable");
  await observer.close();
});

test("hostile WebSocket messages get typed errors and the node stays up", async () => {
  const replies: Uint8Array[] = [];
  const socket = new WebSocket(node.url);
  socket.binaryType = "arraybuffer";
  await new Promise((resolve) => socket.addEventListener("open", resolve, { once: true }));
  const closed = new Promise((resolve) => socket.addEventListener("close", resolve, { once: true }));
  socket.addEventListener("message", (e) => replies.push(new Uint8Array(e.data as ArrayBuffer)));
  socket.send(new Uint8Array([1, 2]));
  await closed;
  const refusal = replies[0];
  assert.ok(refusal !== undefined, "an error reply before the close");
  const view = new DataView(refusal.buffer);
  assert.equal(view.getUint32(0, true), 0, "call 0: no call could be read");
  const text = new TextDecoder().decode(refusal.subarray(8, 8 + view.getUint32(4, true)));
  assert.match(text, /shorter than its call number/);
  await withRuntime(async (rt) => assert.ok((await rt.names()).length >= 0, "the node still serves"));
});

test("a node killed under a waiting get rejects it Unreachable at once, not at its timeout", async () => {
  const doomed = await startNode();
  const rt = await connect(doomed.url);
  const channel = await rt.createChannel("browser/doomed");
  const inp = await (await rt.task(INFINITY)).attachInput(channel);
  const started = Date.now();
  const waiting = inp.get("newest_unseen", { timeoutMs: 30_000 });
  setTimeout(() => doomed.process.kill("SIGKILL"), 200);
  await assert.rejects(waiting, (e: unknown) => e instanceof StampedeError && e.kind === "Unreachable");
  assert.ok(Date.now() - started < 10_000, `rejected after ${Date.now() - started} ms`);
  await assert.rejects(rt.names(), (e: unknown) => e instanceof StampedeError && e.kind === "Unreachable");
  await doomed.stop();
});

test("a node that stops answering fails a call Unreachable within its wait and the margin", async () => {
  const frozen = await startNode();
  const rt = await connect(frozen.url);
  const channel = await rt.createChannel("browser/frozen");
  const inp = await (await rt.task(INFINITY)).attachInput(channel);
  frozen.process.kill("SIGSTOP");
  const started = Date.now();
  try {
    await assert.rejects(inp.get("newest_unseen", { timeoutMs: 500 }), (e: unknown) => e instanceof StampedeError && e.kind === "Unreachable");
    // A get's try does not wait: its deadline is the margin (5 s) past what it asked for.
    assert.ok(Date.now() - started < 8_000, `rejected after ${Date.now() - started} ms`);
  } finally {
    frozen.process.kill("SIGCONT");
    await frozen.stop();
  }
});

test("two hundred calls at once on one session all settle, each with its own reply", async () => {
  await withRuntime(async (rt, base) => {
    const channel = await rt.createChannel("browser/many");
    const out = await (await rt.task(base)).attachOutput(channel);
    const inp = await (await rt.task(INFINITY)).attachInput(channel);
    // More than the node serves at once on a socket (64): the rest wait their turn there.
    await Promise.all(Array.from({ length: 200 }, (_, i) => out.put(base + BigInt(i), `item ${i}`)));
    const items = await Promise.all(Array.from({ length: 200 }, (_, i) => inp.get(base + BigInt(i))));
    items.forEach((item, i) => assert.equal(item.text(), `item ${i}`));
  });
});
