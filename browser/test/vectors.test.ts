// The shared test vectors (tests/vectors/*.vectors, format in tests/vectors/README.md) run by the
// browser client: the same cases the Rust, Python, C and Java suites run, so the clients agree.
// Each case runs on a fresh node of its own (ts_min only rises on a node), through `connect`; every
// operation's outcome — `ok`, an item, a range's timestamps, a ts_min or live count, an npy header,
// or the kind of the StampedeError it rejected with — must equal the expected one. An operation
// this runner does not know, or a failure that is not a StampedeError, fails the case.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  Channel,
  ChannelInput,
  ChannelOutput,
  connect,
  INFINITY,
  Item,
  Queue,
  QueueInput,
  QueueOutput,
  StampedeError,
  type Runtime,
  type Selector,
  type Task,
} from "../src/index.js";
import { decodeNpy } from "../src/npy.js";
import { startNode } from "./node.js";

/** The vectors' directory (this file runs as dist/test/vectors.test.js). */
const VECTORS = fileURLToPath(new URL("../../../tests/vectors/", import.meta.url));

interface Case {
  name: string;
  lines: Array<[number, string]>;
}

/** Every case of every vectors file, with its operations and their line numbers. */
function loadCases(): Case[] {
  const cases: Case[] = [];
  for (const file of readdirSync(VECTORS).filter((f) => f.endsWith(".vectors")).sort()) {
    const stem = file.slice(0, -".vectors".length);
    readFileSync(VECTORS + file, "utf8")
      .split("\n")
      .forEach((raw, index) => {
        const line = (raw.split("#", 1)[0] ?? "").trim();
        if (line === "") return;
        if (line.startsWith("case ")) {
          cases.push({ name: `${stem}:${line.slice(5).trim()}`, lines: [] });
        } else {
          const current = cases[cases.length - 1];
          if (current === undefined) throw new Error(`${file}:${index + 1}: an operation before the first case`);
          current.lines.push([index + 1, line]);
        }
      });
  }
  return cases;
}

/** `-`, `text:<percent-encoded>` or `hex:<bytes>`. */
function payload(token: string): Uint8Array {
  if (token === "-") return new Uint8Array();
  if (token.startsWith("hex:")) return Uint8Array.from(Buffer.from(token.slice(4), "hex"));
  if (!token.startsWith("text:")) throw new Error(`bad payload ${token}`);
  const text = new TextEncoder().encode(token.slice(5));
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === 0x25) {
      out.push(parseInt(new TextDecoder().decode(text.subarray(i + 1, i + 3)), 16));
      i += 2;
    } else {
      out.push(text[i]!);
    }
  }
  return Uint8Array.from(out);
}

function showItem(ts: bigint, codec: string, bytes: Uint8Array): string {
  return `item ${ts} ${codec} ${bytes.length > 0 ? "hex:" + Buffer.from(bytes).toString("hex") : "-"}`;
}

/** The expected value with an item's payload written as `hex:`, as `showItem` writes it. */
function normalise(expected: string): string {
  const [kind, ts, codec, data] = expected.split(" ");
  if (kind === "item" && ts !== undefined && codec !== undefined && data !== undefined) {
    return showItem(BigInt(ts), codec, payload(data));
  }
  return expected;
}

function timestamp(token: string): bigint {
  return token === "inf" ? INFINITY : BigInt(token);
}

const SELECTORS = ["oldest", "newest", "oldest_unseen", "newest_unseen"];

function selector(token: string): Selector {
  return SELECTORS.includes(token) ? (token as Selector) : timestamp(token);
}

function npyHeader(data: Uint8Array): string {
  const array = decodeNpy(data);
  return `npy ${array.dtype} ${array.shape.length > 0 ? array.shape.join("x") : "scalar"}`;
}

type Conn = ChannelInput | ChannelOutput | QueueInput | QueueOutput;

/** What a case has named: tasks, connections, and the items a queue input got (by conn and ts). */
class Env {
  tasks = new Map<string, Task>();
  conns = new Map<string, Conn>();
  held = new Map<string, Item>();

  task(name: string): Task {
    const task = this.tasks.get(name);
    if (task === undefined) throw new Error(`no task named ${name}`);
    return task;
  }

  conn<T extends Conn>(name: string, kind: abstract new (...args: never[]) => T): T {
    const conn = this.conns.get(name);
    if (!(conn instanceof kind)) throw new Error(`no ${kind.name} named ${name}`);
    return conn;
  }
}

/** Takes exactly `count` arguments (so a malformed line fails the case rather than misleads). */
function take(op: string, args: string[], count: number): string[] {
  if (args.length !== count) throw new Error(`${op} takes ${count} arguments, got ${args.length}`);
  return args;
}

/** Runs one operation; its outcome as the vectors write it. */
async function runOperation(rt: Runtime, env: Env, op: string): Promise<string> {
  const [kind = "", ...args] = op.split(" ");
  try {
    switch (kind) {
      case "channel":
      case "queue": {
        const [name, cap] = take(kind, args, 2) as [string, string];
        const limits = cap === "-" ? {} : { capacity: Number(cap) };
        await (kind === "channel" ? rt.createChannel(name, limits) : rt.createQueue(name, limits));
        break;
      }
      case "task": {
        const [name, vt] = take(kind, args, 2) as [string, string];
        env.tasks.set(name, await rt.task(timestamp(vt)));
        break;
      }
      case "vt": {
        const [name, vt] = take(kind, args, 2) as [string, string];
        await env.task(name).setVirtualTime(timestamp(vt));
        break;
      }
      case "close":
        await env.task(take(kind, args, 1)[0]!).close();
        break;
      case "in":
      case "out": {
        const [conn, name, containerName] = take(kind, args, 3) as [string, string, string];
        const task = env.task(name);
        const container = await rt.lookup(containerName);
        let attached: Conn;
        if (container instanceof Queue) {
          attached = kind === "in" ? await task.attachQueueInput(container) : await task.attachQueueOutput(container);
        } else if (container instanceof Channel) {
          attached = kind === "in" ? await task.attachInput(container) : await task.attachOutput(container);
        } else {
          throw new Error(`lookup of ${containerName} gave neither a channel nor a queue`);
        }
        env.conns.set(conn, attached);
        break;
      }
      case "detach": {
        const conn = env.conns.get(take(kind, args, 1)[0]!);
        if (conn === undefined) throw new Error(`no connection named ${args[0]}`);
        await conn.detach();
        break;
      }
      case "put":
      case "tryput":
      case "putref": {
        const [conn, ts, codec, data, refcount] = take(kind, args, kind === "putref" ? 5 : 4) as [string, string, string, string, string?];
        const options = {
          codec,
          ...(kind === "tryput" ? { timeoutMs: 0 } : {}),
          ...(refcount !== undefined ? { refcount: Number(refcount) } : {}),
        };
        const target = env.conns.get(conn);
        if (target instanceof ChannelOutput) await target.put(timestamp(ts), payload(data), options);
        else if (target instanceof QueueOutput && kind !== "putref") await target.put(timestamp(ts), payload(data), options);
        else throw new Error(`no output named ${conn} to ${kind} on`);
        break;
      }
      case "get": {
        const [conn, sel, ms] = take(kind, args, 3) as [string, string, string];
        const item = await env.conn(conn, ChannelInput).get(selector(sel), { timeoutMs: Number(ms) });
        return showItem(item.ts, item.codec, item.bytes);
      }
      case "qget": {
        const [conn, ms] = take(kind, args, 2) as [string, string];
        const item = await env.conn(conn, QueueInput).get({ timeoutMs: Number(ms) });
        env.held.set(`${conn} ${item.ts}`, item);
        return showItem(item.ts, item.codec, item.bytes);
      }
      case "consume": {
        const [conn, ts] = take(kind, args, 2) as [string, string];
        await env.conn(conn, ChannelInput).consume(timestamp(ts));
        break;
      }
      case "qconsume": {
        const [conn, ts] = take(kind, args, 2) as [string, string];
        const key = `${conn} ${timestamp(ts)}`;
        const item = env.held.get(key);
        if (item === undefined) throw new Error(`${conn} got no item at ${ts}`);
        env.held.delete(key);
        await env.conn(conn, QueueInput).consume(item);
        break;
      }
      case "until": {
        const [conn, ts] = take(kind, args, 2) as [string, string];
        await env.conn(conn, ChannelInput).consumeUntil(timestamp(ts));
        break;
      }
      case "range": {
        const [conn, t0, t1] = take(kind, args, 3) as [string, string, string];
        const items = await env.conn(conn, ChannelInput).getRange(timestamp(t0), timestamp(t1));
        return "items " + (items.map((item) => item.ts.toString()).join(",") || "-");
      }
      case "destroy":
        await (await rt.lookup(take(kind, args, 1)[0]!)).destroy();
        break;
      case "lookup":
        await rt.lookup(take(kind, args, 1)[0]!);
        break;
      case "ts_min": {
        take(kind, args, 0);
        const tsMin = await rt.tsMin();
        return tsMin === INFINITY ? "inf" : tsMin.toString();
      }
      case "live":
        return String((await (await rt.lookup(take(kind, args, 1)[0]!)).stats()).live_items);
      case "npy":
        return npyHeader(payload(take(kind, args, 1)[0]!));
      default:
        throw new Error(`unknown operation ${kind}`);
    }
  } catch (e) {
    if (e instanceof StampedeError) return e.kind;
    throw e;
  }
  return "ok";
}

for (const { name, lines } of loadCases()) {
  test(name, async () => {
    const node = await startNode();
    try {
      const rt = await connect(node.url);
      try {
        const env = new Env();
        for (const [number, line] of lines) {
          const split = line.indexOf(" -> ");
          if (split < 0) assert.fail(`line ${number}: \`${line}\` has no \`-> <expected>\``);
          const [op, expected] = [line.slice(0, split), line.slice(split + 4)];
          let got: string;
          try {
            got = await runOperation(rt, env, op);
          } catch (e) {
            assert.fail(`line ${number}: \`${op}\` threw ${e instanceof Error ? e.message : String(e)}, expected \`${expected}\``);
          }
          assert.equal(got, normalise(expected), `line ${number}: \`${op}\` gave \`${got}\`, expected \`${expected}\``);
        }
      } finally {
        await rt.close();
      }
    } finally {
      await node.stop();
    }
  });
}
