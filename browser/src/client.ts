/**
 * Stampede's API in the browser: a {@link Runtime} is a session on a node, reached over the
 * node's WebSocket endpoint, with the operations, rules and errors of every other client
 * (docs/SEMANTICS.md). Timestamps are `bigint` (a `number` that is a safe integer is taken too):
 * nanoseconds since 1970 exceed what a `number` holds exactly, and {@link INFINITY} is `2^63 - 1`.
 *
 * Every call takes an `AbortSignal` (`{ signal }`) and a timeout in ms (`{ timeoutMs }`; none:
 * as long as it takes). A call waiting for an item or for room waits in steps that take nothing
 * — a non-waiting try, then a wait for a change on the connection — so an aborted call has taken
 * nothing and stored nothing: it rejects with the signal's reason, and the item stays for the
 * next get.
 */

import { decodeNpy, encodeNpy, type NdArray, type NpyData } from "./npy.js";
import { invalidArgument, StampedeError } from "./errors.js";
import type { Value } from "./postcard.js";
import { type Replied, Session, unreachable } from "./session.js";

/** The virtual time of a task that never puts on its own. Never an item timestamp. */
export const INFINITY = (1n << 63n) - 1n;

/** A timestamp or virtual time. */
export type Timestamp = bigint | number;

/** Which item a get asks for: a timestamp, or one of the four wildcards. */
export type Selector = Timestamp | "oldest" | "newest" | "oldest_unseen" | "newest_unseen";

/** What every call may be given: a signal that aborts it. A call aborted before it is sent is
 * not sent; one under way rejects at once if it is waiting (for an item, for room), having taken
 * nothing, and otherwise when its reply comes (the node did it: it holds nothing unknown). */
export interface Signal {
  signal?: AbortSignal;
}

/** What a call that may wait may be given. */
export interface CallOptions extends Signal {
  /** How long a get waits for an item, or a put for room (ms; none: as long as it takes). */
  timeoutMs?: number;
}

/** How the node waits at most per request (`REMOTE_WAIT_SLICE`); longer waits are re-asked. */
const WAIT_SLICE_MS = 1000;

const WILDCARDS: Record<string, Value> = {
  oldest: "Oldest",
  newest: "Newest",
  oldest_unseen: "OldestUnseen",
  newest_unseen: "NewestUnseen",
};

function ts(value: Timestamp, what: string): bigint {
  if (typeof value === "bigint") return value;
  if (Number.isSafeInteger(value)) return BigInt(value);
  throw invalidArgument(what, String(value), "a timestamp is a bigint or a safe integer (use INFINITY for infinity)");
}

function selectorValue(selector: Selector): Value {
  if (typeof selector === "string") {
    const wildcard = WILDCARDS[selector];
    if (wildcard === undefined) throw invalidArgument("get", selector, "no such selector");
    return wildcard;
  }
  return { At: ts(selector, "get") };
}

/** The outcome a reply carries: `{ Variant: value }` or `"Variant"`. */
function outcome(replied: Replied): [string, Value] {
  const reply = replied.value as { Outcome?: Value };
  const value = reply.Outcome;
  if (typeof value === "string") return [value, null];
  const [name, inner] = Object.entries((value ?? {}) as Record<string, Value>)[0] ?? ["", null];
  return [name, inner];
}

/** One item: timestamp, codec and bytes (a view of the reply: no copy). */
export class Item {
  constructor(
    readonly ts: bigint,
    readonly codec: string,
    readonly bytes: Uint8Array,
    /** A queue item's number on its connection; `undefined` for a channel's. */
    readonly seq?: number,
  ) {}

  /** The bytes as UTF-8 text (codecs `utf8`, `json`). */
  text(): string {
    return new TextDecoder().decode(this.bytes);
  }

  /** The bytes as JSON (codec `json`). */
  json(): unknown {
    return JSON.parse(this.text());
  }

  /** The `.npy` payload as a typed array with its dtype and shape (codec `npy`). */
  array(): NdArray {
    return decodeNpy(this.bytes);
  }
}

/** Items as a reply carries them: headers, then their payloads one after another. */
function items(headers: Value[], payload: Uint8Array, seq?: number): Item[] {
  let at = 0;
  return headers.map((header) => {
    const { ts: itemTs, codec, len } = header as { ts: bigint; codec: string; len: number };
    if (len > payload.length - at) throw unreachable("get", codec, "the node sent less than an item's length");
    const item = new Item(itemTs, codec, payload.subarray(at, at + len), seq);
    at += len;
    return item;
  });
}

/** What a put sends: bytes and a codec, from what the caller gave. */
export type Data = Uint8Array | ArrayBuffer | string | NpyData | { data: NpyData; shape: number[] } | object;

function encodeData(data: Data, codec: string | undefined): [Uint8Array, string] {
  if (data instanceof Uint8Array) return [data, codec ?? "raw"];
  if (data instanceof ArrayBuffer) return [new Uint8Array(data), codec ?? "raw"];
  if (typeof data === "string") return [new TextEncoder().encode(data), codec ?? "utf8"];
  if (ArrayBuffer.isView(data)) return [encodeNpy(data as NpyData), codec ?? "npy"];
  if ("data" in data && "shape" in data && ArrayBuffer.isView(data.data)) {
    return [encodeNpy(data.data as NpyData, data.shape as number[]), codec ?? "npy"];
  }
  return [new TextEncoder().encode(JSON.stringify(data)), codec ?? "json"];
}

/** Runs `attempt` until it succeeds, `retry` says its error is not final, or time is up; between
 * tries waits for a change (`change`), which takes nothing and is what an abort interrupts. */
async function waiting<T>(
  options: CallOptions,
  attempt: () => Promise<T>,
  retry: (e: StampedeError) => boolean,
  change: (waitMs: number) => Promise<unknown>,
): Promise<T> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + Math.max(0, options.timeoutMs);
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      return await attempt();
    } catch (e) {
      if (!(e instanceof StampedeError) || !retry(e) || Date.now() >= deadline) throw e;
    }
    const waitMs = Math.min(WAIT_SLICE_MS, deadline - Date.now());
    await abortable(change(waitMs), options.signal);
  }
}

function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const aborted = () => reject(signal.reason);
    signal.addEventListener("abort", aborted, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", aborted));
  });
}

/** What connecting takes besides the URL. */
export interface ConnectOptions {
  /** On a node with an access policy: the user and password. */
  user?: string;
  password?: string;
  /** How long to wait for the node (ms; default 10 000). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The WebSocket class (default: the global one). */
  WebSocket?: typeof WebSocket;
}

/** Opens a session on the node whose WebSocket endpoint is `url` (`ws://127.0.0.1:8765`). */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Runtime> {
  const Socket = options.WebSocket ?? globalThis.WebSocket;
  const socket = new Socket(url);
  const session = new Session(socket, url);
  const timeoutMs = options.timeoutMs ?? 10_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const opened = new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve(), { once: true });
    socket.addEventListener("close", (e) => reject(unreachable("connect", url, `closed (${e.code}) before it opened`)));
    timer = setTimeout(() => reject(unreachable("connect", url, `no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await abortable(opened, options.signal);
    const hello = await abortable(session.call("Hello", { op: "connect" }), options.signal);
    const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
    session.id = id;
    const open = { Open: { user: options.user ?? null, password: options.password ?? null } };
    const replied = await abortable(session.call(open, { op: "connect" }), options.signal);
    session.secret = (replied.value as { Opened: number[] }).Opened;
    const about = (hello.value as { Hello: { node: string; payload_bytes_max: number } }).Hello;
    return new Runtime(session, about.node, about.payload_bytes_max);
  } catch (e) {
    session.close("connect failed");
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** @internal How an operation is run. */
export interface RunOptions extends Signal {
  waitMs?: number;
  payload?: Uint8Array;
  opName: string;
}

/** A session on a node: its channels, queues and tasks. */
export class Runtime {
  constructor(
    /** @internal */ readonly session: Session,
    /** The node's name. */
    readonly node: string,
    /** The largest payload the node takes in one put. */
    readonly payloadBytesMax: number,
  ) {}

  /** @internal Runs `op` (an `Op` value) and returns its outcome. */
  async run(op: Value, options: RunOptions): Promise<[string, Value, Replied]> {
    options.signal?.throwIfAborted();
    const replied = await this.session.call({ Op: op }, { waitMs: options.waitMs, payload: options.payload, op: options.opName });
    const [name, value] = outcome(replied);
    return [name, value, replied];
  }

  async createChannel(
    name: string,
    limits: Signal & { capacity?: number; maxBytes?: number; retention?: "history" | "current_readers"; codec?: string; description?: string } = {},
  ): Promise<Channel> {
    const op = {
      CreateChannel: {
        name,
        capacity: limits.capacity ?? null,
        bytes_max: limits.maxBytes ?? null,
        retention: limits.retention === "current_readers" ? "CurrentReaders" : "History",
        codec: limits.codec ?? null,
        description: limits.description ?? "",
      },
    };
    const [, info] = await this.run(op, { signal: limits.signal, opName: "create_channel" });
    return new Channel(this, info as unknown as ContainerInfo);
  }

  async createQueue(name: string, limits: Signal & { capacity?: number; maxBytes?: number; description?: string } = {}): Promise<Queue> {
    const op = {
      CreateQueue: { name, capacity: limits.capacity ?? null, bytes_max: limits.maxBytes ?? null, description: limits.description ?? "" },
    };
    const [, info] = await this.run(op, { signal: limits.signal, opName: "create_queue" });
    return new Queue(this, info as unknown as ContainerInfo);
  }

  /** The channel or queue named `name`; `NotFound` if none is. */
  async lookup(name: string, options: Signal = {}): Promise<Channel | Queue> {
    const [, info] = await this.run({ Lookup: { name } }, { signal: options.signal, opName: "lookup" });
    const container = info as unknown as ContainerInfo;
    return container.queue ? new Queue(this, container) : new Channel(this, container);
  }

  /** The names under `prefix` (`""`: all). */
  async names(prefix = "", options: Signal = {}): Promise<string[]> {
    const [, names] = await this.run({ Names: { prefix } }, { signal: options.signal, opName: "names" });
    return names as string[];
  }

  /** A root task at `virtualTime` ({@link INFINITY}: a reader that holds nothing back). */
  async task(virtualTime: Timestamp, options: Signal = {}): Promise<Task> {
    const [, handle] = await this.run({ Task: { virtual_time: ts(virtualTime, "task") } }, { signal: options.signal, opName: "task" });
    return new Task(this, handle as number);
  }

  async tsMin(options: Signal = {}): Promise<bigint> {
    const [, value] = await this.run("TsMin", { signal: options.signal, opName: "ts_min" });
    return value as bigint;
  }

  async stats(options: Signal = {}): Promise<{ ts_min: bigint; containers: number; claims: number }> {
    const [, value] = await this.run("Stats", { signal: options.signal, opName: "stats" });
    return value as { ts_min: bigint; containers: number; claims: number };
  }

  /** Reclaims what is garbage now; returns how many items. */
  async collect(options: Signal = {}): Promise<number> {
    const [, count] = await this.run("Collect", { signal: options.signal, opName: "collect" });
    return count as number;
  }

  /** Ends the session: its tasks close, its connections detach, what it held goes back. */
  async close(): Promise<void> {
    if (this.session.endedBecause !== null) return;
    try {
      await this.session.call("Close", { op: "close" });
    } finally {
      this.session.close("the runtime was closed");
    }
  }
}

interface ContainerInfo {
  id: number;
  queue: boolean;
  name: string;
}

/** What a channel's or queue's counters say. */
export interface Stats {
  live_items: number;
  live_bytes: number;
  reclaimed: number;
  puts: number;
  gets: number;
  inputs: number;
  outputs: number;
  claim: bigint | null;
  ts_min: bigint;
}

class Container {
  readonly name: string;
  /** @internal */ readonly id: number;

  constructor(
    /** @internal */ readonly runtime: Runtime,
    info: ContainerInfo,
  ) {
    this.name = info.name;
    this.id = info.id;
  }

  async stats(options: Signal = {}): Promise<Stats> {
    const [, stats] = await this.runtime.run({ ContainerStats: { container: this.id } }, { signal: options.signal, opName: "stats" });
    return stats as unknown as Stats;
  }

  /** Destroys it: its connections close, its items go. */
  async destroy(options: Signal = {}): Promise<void> {
    await this.runtime.run({ Destroy: { container: this.id } }, { signal: options.signal, opName: "destroy" });
  }
}

export class Channel extends Container {}
export class Queue extends Container {}

/** A task: the unit that holds a virtual time. */
export class Task {
  constructor(
    private readonly runtime: Runtime,
    /** @internal */ readonly id: number,
  ) {}

  async setVirtualTime(virtualTime: Timestamp, options: Signal = {}): Promise<void> {
    const op = { SetVirtualTime: { task: this.id, virtual_time: ts(virtualTime, "set_virtual_time") } };
    await this.runtime.run(op, { signal: options.signal, opName: "set_virtual_time" });
  }

  /** Its virtual time and visibility. */
  async times(options: Signal = {}): Promise<{ virtualTime: bigint; visibility: bigint }> {
    const [, times] = await this.runtime.run({ Times: { task: this.id } }, { signal: options.signal, opName: "virtual_time" });
    const { virtual_time, visibility } = times as { virtual_time: bigint; visibility: bigint };
    return { virtualTime: virtual_time, visibility };
  }

  async spawn(virtualTime: Timestamp, options: Signal = {}): Promise<Task> {
    const op = { Spawn: { task: this.id, virtual_time: ts(virtualTime, "spawn") } };
    const [, handle] = await this.runtime.run(op, { signal: options.signal, opName: "spawn" });
    return new Task(this.runtime, handle as number);
  }

  async setName(name: string, options: Signal = {}): Promise<void> {
    await this.runtime.run({ SetTaskName: { task: this.id, name } }, { signal: options.signal, opName: "set_name" });
  }

  async close(options: Signal = {}): Promise<void> {
    await this.runtime.run({ CloseTask: { task: this.id } }, { signal: options.signal, opName: "close" });
  }

  async attachInput(
    channel: Channel,
    options: Signal & { maxLagItems?: number; maxLagTs?: number } = {},
  ): Promise<ChannelInput> {
    const op = {
      AttachInput: {
        task: this.id,
        container: channel.id,
        max_lag_items: options.maxLagItems ?? null,
        max_lag_ts: options.maxLagTs ?? null,
        // The node pushes to zenoh sessions only: a browser's gets are each a request.
        prefetch: "off",
      },
    };
    const [, handle] = await this.runtime.run(op, { signal: options.signal, opName: "attach_input" });
    return new ChannelInput(this.runtime, handle as number, channel.name);
  }

  async attachOutput(channel: Channel, options: Signal = {}): Promise<ChannelOutput> {
    return new ChannelOutput(this.runtime, await this.attach(channel, options), channel.name);
  }

  async attachQueueInput(queue: Queue, options: Signal = {}): Promise<QueueInput> {
    const op = { AttachInput: { task: this.id, container: queue.id, max_lag_items: null, max_lag_ts: null, prefetch: "off" } };
    const [, handle] = await this.runtime.run(op, { signal: options.signal, opName: "attach_input" });
    return new QueueInput(this.runtime, handle as number, queue.name);
  }

  async attachQueueOutput(queue: Queue, options: Signal = {}): Promise<QueueOutput> {
    return new QueueOutput(this.runtime, await this.attach(queue, options), queue.name);
  }

  private async attach(container: Channel | Queue, options: Signal): Promise<number> {
    const [, handle] = await this.runtime.run({ AttachOutput: { task: this.id, container: container.id } }, { signal: options.signal, opName: "attach_output" });
    return handle as number;
  }
}

class Connection {
  private detached = false;

  constructor(
    /** @internal */ readonly runtime: Runtime,
    /** @internal */ readonly id: number,
    /** The channel's or queue's name. */
    readonly name: string,
  ) {}

  /** Detaches: what it held goes back, and every later call fails `Closed`. Idempotent. */
  async detach(options: Signal = {}): Promise<void> {
    if (this.detached) return;
    options.signal?.throwIfAborted();
    this.detached = true;
    await this.runtime.run({ Detach: { connection: this.id } }, { signal: options.signal, opName: "detach" });
  }

  /** @internal Runs an operation of this connection: `Closed` once it is detached, as in every
   * client (the node no longer knows its handle). */
  run(op: Value, options: RunOptions): Promise<[string, Value, Replied]> {
    if (this.detached) {
      const reason = "the connection was detached";
      return Promise.reject(new StampedeError("Closed", `"${this.name}" is closed: ${reason}`, { name: this.name, reason }));
    }
    return this.runtime.run(op, options);
  }

  /** @internal Waits at most `waitMs` for a change a get (`selector`) or a put would wake on. */
  changed(selector: Value, waitMs: number): Promise<unknown> {
    const op = { WaitChanged: { connection: this.id, selector, wait_us: Math.max(0, Math.floor(waitMs * 1000)) } };
    return this.run(op, { waitMs, opName: "changed" });
  }

  /** @internal A put of `data` at `timestamp` that waits for room as `options` say. */
  putting(op: (timestamp: bigint, codec: string) => Value, timestamp: Timestamp, data: Data, options: CallOptions & { codec?: string }): Promise<void> {
    const [payload, codec] = encodeData(data, options.codec);
    const at = ts(timestamp, "put");
    return waiting(
      options,
      async () => void (await this.run(op(at, codec), { payload, signal: options.signal, opName: "put" })),
      (e) => e.kind === "Full" && e.fields["can_never_fit"] !== true,
      (waitMs) => this.changed(null, waitMs),
    );
  }
}

export class ChannelOutput extends Connection {
  /** Puts `data` at `timestamp`: bytes (`raw`), text (`utf8`), a typed array or `{ data, shape }`
   * (`npy`), anything else as JSON (`json`) — or as `options.codec` says. */
  put(timestamp: Timestamp, data: Data, options: CallOptions & { codec?: string; refcount?: number } = {}): Promise<void> {
    const refcount = options.refcount ?? null;
    return this.putting((at, codec) => ({ Put: { connection: this.id, ts: at, codec, refcount, wait_us: 0 } }), timestamp, data, options);
  }

  /** How many readers wait for what this output puts next (demand feedback). */
  async demand(options: Signal = {}): Promise<number> {
    const [, count] = await this.run({ Demand: { connection: this.id } }, { signal: options.signal, opName: "demand" });
    return count as number;
  }
}

export class QueueOutput extends Connection {
  put(timestamp: Timestamp, data: Data, options: CallOptions & { codec?: string } = {}): Promise<void> {
    return this.putting((at, codec) => ({ QueuePut: { connection: this.id, ts: at, codec, wait_us: 0 } }), timestamp, data, options);
  }
}

export class ChannelInput extends Connection {
  /** The item `selector` names, waiting for it as `options` say. */
  get(selector: Selector, options: CallOptions = {}): Promise<Item> {
    const chosen = selectorValue(selector);
    return waiting(
      options,
      async () => {
        const [, header, replied] = await this.run({ Get: { connection: this.id, selector: chosen, wait_us: 0 } }, { signal: options.signal, opName: "get" });
        return items([header], replied.payload)[0] as Item;
      },
      (e) => e.kind === "NotAvailable" && e.fields["settled"] !== true,
      (waitMs) => this.changed(chosen, waitMs),
    );
  }

  /** Every item with `t0 <= ts <= t1` present and not consumed here, in timestamp order. */
  async getRange(t0: Timestamp, t1: Timestamp, options: Signal = {}): Promise<Item[]> {
    const op = { GetRange: { connection: this.id, t0: ts(t0, "get_range"), t1: ts(t1, "get_range") } };
    const [, headers, replied] = await this.run(op, { signal: options.signal, opName: "get_range" });
    return items(headers as Value[], replied.payload);
  }

  async consume(timestamp: Timestamp, options: Signal = {}): Promise<void> {
    await this.run({ Consume: { connection: this.id, ts: ts(timestamp, "consume") } }, { signal: options.signal, opName: "consume" });
  }

  async consumeUntil(timestamp: Timestamp, options: Signal = {}): Promise<void> {
    const op = { ConsumeUntil: { connection: this.id, ts: ts(timestamp, "consume_until") } };
    await this.run(op, { signal: options.signal, opName: "consume_until" });
  }
}

export class QueueInput extends Connection {
  /** The oldest item no other input of the queue has, waiting for one as `options` say. */
  get(options: CallOptions = {}): Promise<Item> {
    return waiting(
      options,
      async () => {
        const [, value, replied] = await this.run({ QueueGet: { connection: this.id, wait_us: 0 } }, { signal: options.signal, opName: "get" });
        const { seq, item } = value as { seq: number; item: Value };
        return items([item], replied.payload, seq)[0] as Item;
      },
      (e) => e.kind === "NotAvailable",
      (waitMs) => this.changed(null, waitMs),
    );
  }

  /** Consumes `item` (one this input got), or the oldest open item at a timestamp. */
  async consume(item: Item | Timestamp, options: Signal = {}): Promise<void> {
    const [seq, at] = item instanceof Item ? [item.seq ?? null, item.ts] : [null, ts(item, "consume")];
    await this.run({ QueueConsume: { connection: this.id, seq, ts: at } }, { signal: options.signal, opName: "consume" });
  }
}
