// The node's WebSocket endpoint, seen by a hand-written client (test/raw.ts): whose pages may
// open it, what a socket may send before and after its session opens, bounds on what it sends,
// and a frozen client — one that never answers the node's pings, as a closed laptop's tab —
// losing its session, and with it its hold on ts_min, after the liveliness timeout.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { connect } from "../src/index.js";
import { decodeMessage, encodeRequest, REPLY, type RequestHeader } from "../src/wire.js";
import type { Value } from "../src/postcard.js";
import { startNode, type TestNode } from "./node.js";
import { call, RawSocket, reply } from "./raw.js";

const ALLOWED = "http://viewer.example:8000";
let node: TestNode;

before(async () => {
  node = await startNode(["--allow-origin", ALLOWED]);
});

after(async () => {
  await node.stop();
});

function header(session: string, secret: number[], seq: number, request: Value): RequestHeader {
  return { session, secret, seq, acks: [], floor: seq, opened: [], consumed: [], released: [], request };
}

/** Opens a session on a raw socket; its id and secret. */
async function open(socket: RawSocket, session: string): Promise<number[]> {
  socket.send(call(1, encodeRequest(header(session, new Array(16).fill(0), 0, { Open: { user: null, password: null } }))));
  assert.ok(await socket.until(() => socket.binary().length >= 1, 5000), "Open is answered");
  const answer = reply(socket.binary()[0] ?? new Uint8Array());
  const { value } = decodeMessage(answer.message, REPLY);
  return (value as { Opened: number[] }).Opened;
}

test("a page of another origin is refused; an allowed one and a program are admitted", async () => {
  const evil = await RawSocket.open(node.url, { Origin: "https://evil.example" });
  assert.match(evil.status, / 403 /);
  evil.end();
  const viewer = await RawSocket.open(node.url, { Origin: ALLOWED });
  assert.match(viewer.status, / 101 /);
  viewer.end();
  const program = await RawSocket.open(node.url);
  assert.match(program.status, / 101 /);
  program.end();
});

test("before its session opens a socket sends Hello and Open only, and nothing large", async () => {
  const socket = await RawSocket.open(node.url);
  socket.send(call(5, encodeRequest(header("feed", new Array(16).fill(0), 1, { Op: "TsMin" }))));
  assert.ok(await socket.until(() => socket.binary().length >= 1, 5000));
  const refused = reply(socket.binary()[0] ?? new Uint8Array());
  assert.equal(refused.call, 5);
  assert.match(refused.text, /sends Hello and Open first/);
  socket.send(new Uint8Array(20_000).fill(7));
  assert.ok(await socket.until(() => socket.closed, 5000), "a message larger than a request header closes it");
  const last = reply(socket.binary().at(-1) ?? new Uint8Array());
  assert.equal(last.call, 0);
  assert.match(last.text, /could not be read/);
});

test("a text message is refused with a typed error", async () => {
  const socket = await RawSocket.open(node.url);
  socket.send(new TextEncoder().encode("hello?"), 0x1);
  assert.ok(await socket.until(() => socket.closed, 5000));
  assert.match(reply(socket.binary()[0] ?? new Uint8Array()).text, /calls are binary messages/);
});

test("an open socket carries its own session's requests only", async () => {
  const socket = await RawSocket.open(node.url);
  const secret = await open(socket, "aaaa0001");
  socket.send(call(2, encodeRequest(header("bbbb0002", secret, 1, { Op: "TsMin" }))));
  assert.ok(await socket.until(() => socket.binary().length >= 2, 5000));
  assert.match(reply(socket.binary()[1] ?? new Uint8Array()).text, /carries the requests of the session it opened/);
  socket.send(call(3, encodeRequest(header("aaaa0001", secret, 2, { Op: "TsMin" }))));
  assert.ok(await socket.until(() => socket.binary().length >= 3, 5000));
  const answered = reply(socket.binary()[2] ?? new Uint8Array());
  assert.deepEqual([answered.call, answered.text], [3, ""]);
  socket.end();
});

test("a client that stops answering pings loses its session after the liveliness timeout", async () => {
  const observer = await connect(node.url);
  const base = await observer.tsMin();
  const channel = await observer.createChannel("endpoint/held");
  const producer = await observer.task(base);
  await (await producer.attachOutput(channel)).put(base + 50n, "far");
  const frozen = await RawSocket.open(node.url);
  const secret = await open(frozen, "cccc0003");
  frozen.send(call(2, encodeRequest(header("cccc0003", secret, 1, { Op: { Task: { virtual_time: base + 10n } } }))));
  assert.ok(await frozen.until(() => frozen.binary().length >= 2, 5000));
  assert.equal(reply(frozen.binary()[1] ?? new Uint8Array()).text, "", "its task started");
  await producer.close();
  assert.equal(await observer.tsMin(), base + 10n, "the frozen client's task holds ts_min");
  // It reads nothing more and answers no ping; the node (liveliness timeout 2 s) ends it.
  const started = Date.now();
  let tsMin = base;
  while (Date.now() - started < 10_000 && tsMin !== base + 51n) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    tsMin = await observer.tsMin();
  }
  assert.equal(tsMin, base + 51n, "the session ended and gave ts_min back");
  assert.ok(frozen.frames.some((f) => f.opcode === 0x9), "the node pinged it");
  frozen.end();
  await observer.close();
});
