/**
 * One session on a node, over one WebSocket (the node's `--websocket` endpoint, docs/BROWSER.md):
 * calls numbered on the socket, requests numbered in the session, replies matched to their calls.
 *
 * ```text
 * client → node   [call: u32 LE][request message]
 * node → client   [call: u32 LE][error text length: u32 LE][error text][reply message]
 * ```
 *
 * The session protocol's client rules (`stampede_wire::session::client`), as they apply on one
 * ordered socket: every request but `Open` carries the next number; each header acknowledges the
 * replies read since the last (at most `ACKS_MAX`) and carries the floor — the lowest number still
 * under way — so the node forgets what it kept for repeats. No reply is lost while the socket
 * lives, and the session ends when the socket does (the node gives back what it held), so a call
 * is never retried: a call without its reply fails `Unreachable`.
 *
 * Guarantees:
 * - Every call settles: with its reply, or when the socket ends, or past its deadline (the wait it
 *   asked for plus {@link QUERY_MARGIN_MS}); a call that may hold something on the node and gets
 *   no reply in time ends the session, so that the node gives it back.
 * - A reply that does not decode fails its call with `Unreachable` and ends the session: the
 *   client cannot know what the node did.
 */

import { StampedeError } from "./errors.js";
import { DecodeError, type Value } from "./postcard.js";
import { decodeMessage, encodeRequest, REPLY, type RequestHeader } from "./wire.js";

/** As `stampede_wire::session::QUERY_MARGIN`: how much longer than its wait a reply may take. */
export const QUERY_MARGIN_MS = 5000;

/** As `stampede_wire::ACKS_MAX`: acknowledgements one header carries. */
const ACKS_MAX = 64;

const CALL_BYTES = 4;

/**
 * The operations whose lost reply leaves the node holding what the client does not know of (the
 * Rust `Op::holds_on_node`; the golden vectors' `holds_on_node` hold this list to it).
 */
export const HOLDS_ON_NODE: ReadonlySet<string> = new Set([
  "Get",
  "GetRange",
  "QueueGet",
  "Task",
  "Spawn",
  "MoveTask",
  "TakeOverTask",
  "AttachInput",
  "AttachOutput",
  "CloseTask",
  "Detach",
]);

/** A reply: its value, and the payloads after its header. */
export interface Replied {
  value: Value;
  payload: Uint8Array;
}

interface Pending {
  resolve(replied: Replied): void;
  reject(error: unknown): void;
  seq: number;
  timer: ReturnType<typeof setTimeout>;
}

/** The error of a call that could not reach the node, or whose session ended. */
export function unreachable(op: string, name: string, reason: string): StampedeError {
  return new StampedeError("Unreachable", `${op} on "${name}": unreachable (${reason})`, { op, name, reason });
}

export class Session {
  private nextCall = 1;
  private nextSeq = 1;
  private acks: number[] = [];
  private readonly underWay = new Set<number>();
  private readonly pending = new Map<number, Pending>();
  private ended: string | null = null;
  id = "";
  secret: number[] = new Array<number>(16).fill(0);

  constructor(
    private readonly socket: WebSocket,
    /** What errors name: the node's endpoint. */
    readonly endpoint: string,
  ) {
    socket.binaryType = "arraybuffer";
    socket.addEventListener("message", (event) => this.received(event.data));
    socket.addEventListener("close", () => this.end("the WebSocket closed"));
    socket.addEventListener("error", () => this.end("the WebSocket failed"));
  }

  /** Sends `request` (a `Request` value) with `payload`, and resolves with its reply. */
  call(request: Value, options: { waitMs?: number; payload?: Uint8Array; op?: string } = {}): Promise<Replied> {
    const op = options.op ?? "request";
    if (this.ended !== null) return Promise.reject(unreachable(op, this.endpoint, this.ended));
    const isOpen = typeof request === "object" && request !== null && "Open" in request;
    const seq = isOpen ? 0 : this.nextSeq++;
    if (seq !== 0) this.underWay.add(seq);
    const header: RequestHeader = {
      session: this.id,
      secret: this.secret,
      seq,
      acks: this.acks.splice(Math.max(0, this.acks.length - ACKS_MAX)),
      floor: this.underWay.size > 0 ? Math.min(...this.underWay) : this.nextSeq,
      opened: [],
      consumed: [],
      released: [],
      request,
    };
    const message = encodeRequest(header, options.payload);
    const framed = new Uint8Array(CALL_BYTES + message.length);
    const call = this.nextCall;
    this.nextCall = call >= 0xffff_ffff ? 1 : call + 1;
    new DataView(framed.buffer).setUint32(0, call, true);
    framed.set(message, CALL_BYTES);
    const opName = operation(request);
    return new Promise<Replied>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(call);
        this.concluded(seq);
        reject(unreachable(op, this.endpoint, `no reply within ${(options.waitMs ?? 0) + QUERY_MARGIN_MS} ms`));
        if (HOLDS_ON_NODE.has(opName)) this.close(`a ${opName} went unanswered: what it held goes back`);
      }, (options.waitMs ?? 0) + QUERY_MARGIN_MS);
      this.pending.set(call, { resolve, reject, seq, timer });
      this.socket.send(framed);
    });
  }

  /** Ends the session: the socket closes and every call under way fails `Unreachable`. */
  close(reason: string): void {
    this.end(reason);
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      this.socket.close(1000);
    }
  }

  /** Why the session ended, or `null` while it lives. */
  get endedBecause(): string | null {
    return this.ended;
  }

  private concluded(seq: number): void {
    if (seq !== 0) this.underWay.delete(seq);
  }

  private received(data: unknown): void {
    if (!(data instanceof ArrayBuffer) || data.byteLength < 2 * CALL_BYTES) {
      return this.close("the node sent a message that is no reply");
    }
    const view = new DataView(data);
    const call = view.getUint32(0, true);
    const textLength = view.getUint32(CALL_BYTES, true);
    if (textLength > data.byteLength - 2 * CALL_BYTES) return this.close("the node sent a reply cut short");
    const text = new TextDecoder().decode(new Uint8Array(data, 2 * CALL_BYTES, textLength));
    const message = new Uint8Array(data, 2 * CALL_BYTES + textLength);
    const pending = this.pending.get(call);
    if (pending === undefined) {
      // Call 0: the node refused a message that was no call (this client sends none) — or a
      // reply after its call gave up, which the node's session rules make harmless.
      if (call === 0) this.close(`the node refused a message: ${text}`);
      return;
    }
    this.pending.delete(call);
    clearTimeout(pending.timer);
    this.concluded(pending.seq);
    if (pending.seq !== 0) this.acks.push(pending.seq);
    let replied: Replied;
    try {
      replied = decodeMessage(message, REPLY);
    } catch (e) {
      const reason = e instanceof DecodeError ? e.message : String(e);
      pending.reject(unreachable("reply", this.endpoint, `a reply that does not decode: ${reason}`));
      return this.close("a reply did not decode");
    }
    const error = errorOf(replied.value, text);
    if (error === null) pending.resolve(replied);
    else pending.reject(error);
  }

  private end(reason: string): void {
    if (this.ended !== null) return;
    this.ended = reason;
    for (const [call, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(unreachable("request", this.endpoint, reason));
      this.pending.delete(call);
    }
  }
}

/** The name of the operation a `Request` value carries (`"Hello"`, `"Get"`, …). */
function operation(request: Value): string {
  if (typeof request === "string") return request;
  if (request === null || typeof request !== "object" || Array.isArray(request) || typeof request === "bigint") {
    return "request";
  }
  const op = request["Op"];
  if (op === undefined) return Object.keys(request)[0] ?? "request";
  return typeof op === "string" ? op : Object.keys(op ?? {})[0] ?? "request";
}

/** The error a reply carries, as a {@link StampedeError} with the node's text; `null` for none. */
function errorOf(reply: Value, text: string): StampedeError | null {
  if (reply === null || typeof reply !== "object" || Array.isArray(reply) || typeof reply === "bigint") return null;
  const error = reply["Error"];
  if (error === undefined || error === null || typeof error !== "object" || Array.isArray(error)) return null;
  const [kind, fields] = Object.entries(error)[0] ?? [];
  if (kind === undefined) return null;
  const record = (fields ?? {}) as Record<string, unknown>;
  return new StampedeError(kind as StampedeError["kind"], text || kind, record);
}
