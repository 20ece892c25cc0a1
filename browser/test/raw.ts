// A WebSocket client written by hand over TCP (RFC 6455), for what a browser's WebSocket cannot
// do: send an `Origin` of its choice, send what no client should, and never answer a ping — a
// frozen tab.

import { randomBytes } from "node:crypto";
import { connect as tcp, type Socket } from "node:net";

export interface Frame {
  opcode: number;
  payload: Uint8Array;
}

export class RawSocket {
  /** The HTTP status line of the upgrade's answer. */
  status = "";
  readonly frames: Frame[] = [];
  closed = false;
  private buffer = Buffer.alloc(0);
  private upgraded = false;
  private waiters: Array<() => void> = [];

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => undefined);
  }

  /** Connects to `url` (`ws://host:port`) and asks for the upgrade with `headers`. */
  static async open(url: string, headers: Record<string, string> = {}): Promise<RawSocket> {
    const { hostname, port } = new URL(url);
    const socket = tcp({ host: hostname, port: Number(port) });
    await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const raw = new RawSocket(socket);
    const lines = [
      "GET / HTTP/1.1",
      `Host: ${hostname}:${port}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}`,
      "Sec-WebSocket-Version: 13",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    socket.write(lines.join("\r\n") + "\r\n\r\n");
    await raw.until(() => raw.status !== "" || raw.closed, 5000);
    return raw;
  }

  /** Sends one frame (masked, as a client must). */
  send(payload: Uint8Array, opcode = 0x2): void {
    const length = payload.length;
    const head =
      length < 126
        ? Buffer.from([0x80 | opcode, 0x80 | length])
        : length < 65536
          ? Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff])
          : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), bigEndian64(length)]);
    const mask = randomBytes(4);
    const masked = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] ?? 0)));
    this.socket.write(Buffer.concat([head, mask, masked]));
  }

  /** Waits until `done()` or `timeoutMs` passed; whether it is done. */
  async until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done() && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.min(100, Math.max(0, deadline - Date.now())));
      });
    }
    return done();
  }

  /** The binary frames received, in order. */
  binary(): Uint8Array[] {
    return this.frames.filter((f) => f.opcode === 0x2).map((f) => f.payload);
  }

  end(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  private parse(): void {
    if (!this.upgraded) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      this.status = this.buffer.subarray(0, end).toString().split("\r\n")[0] ?? "";
      this.buffer = this.buffer.subarray(end + 4);
      this.upgraded = true;
    }
    for (;;) {
      if (this.buffer.length < 2) break;
      const opcode = (this.buffer[0] ?? 0) & 0x0f;
      let length = (this.buffer[1] ?? 0) & 0x7f;
      let at = 2;
      if (length === 126) {
        if (this.buffer.length < 4) break;
        length = this.buffer.readUInt16BE(2);
        at = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) break;
        length = Number(this.buffer.readBigUInt64BE(2));
        at = 10;
      }
      if (this.buffer.length < at + length) break;
      this.frames.push({ opcode, payload: new Uint8Array(this.buffer.subarray(at, at + length)) });
      this.buffer = this.buffer.subarray(at + length);
    }
    this.wake();
  }
}

function bigEndian64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** A call's message: its number, then `message`. */
export function call(number: number, message: Uint8Array): Uint8Array {
  const framed = new Uint8Array(4 + message.length);
  new DataView(framed.buffer).setUint32(0, number, true);
  framed.set(message, 4);
  return framed;
}

/** A reply's call number, error text and reply message. */
export function reply(frame: Uint8Array): { call: number; text: string; message: Uint8Array } {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const length = view.getUint32(4, true);
  return {
    call: view.getUint32(0, true),
    text: new TextDecoder().decode(frame.subarray(8, 8 + length)),
    message: frame.subarray(8 + length),
  };
}
