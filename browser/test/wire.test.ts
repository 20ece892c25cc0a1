// The TypeScript codec held to the Rust one: every golden vector of tests/vectors/wire.json
// (written by crates/stampede-wire/tests/golden.rs) encodes to its bytes and decodes to its value;
// the replies a browser does not read are refused with a DecodeError; the operations whose lost
// reply ends the session are Rust's; and hostile bytes (every truncation, seeded mutations) give a
// DecodeError, never another exception.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { decode, DecodeError, encode, Reader, Writer, type Schema, type Value } from "../src/postcard.js";
import { HOLDS_ON_NODE } from "../src/session.js";
import { decodeMessage, REPLY, REQUEST_HEADER, VERSION } from "../src/wire.js";

interface Vector {
  name: string;
  value: Value;
  hex: string;
}

const golden = JSON.parse(readFileSync(new URL("../../../tests/vectors/wire.json", import.meta.url), "utf8")) as {
  version: number;
  requests: Vector[];
  replies: Vector[];
  unread_replies: Vector[];
  holds_on_node: string[];
};

/** The JSON value as the codec takes it: big integers (decimal strings there) as bigints. */
function revive(value: Value): Value {
  if (typeof value === "string" && /^-?\d{16,}$/.test(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map(revive);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, revive(v)]));
  }
  return value;
}

/** Equal up to how a number travels: a bigint field equals the same number. */
function same(actual: Value, expected: Value, at = "value"): void {
  if (typeof actual === "bigint" && (typeof expected === "number" || typeof expected === "bigint")) {
    assert.equal(actual, BigInt(expected), at);
  } else if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${at} is an array`);
    assert.equal(actual.length, expected.length, `${at}'s length`);
    expected.forEach((e, i) => same(actual[i] ?? null, e, `${at}[${i}]`));
  } else if (expected !== null && typeof expected === "object" && typeof expected !== "bigint") {
    assert.ok(actual !== null && typeof actual === "object" && !Array.isArray(actual), `${at} is an object`);
    const a = actual as { [key: string]: Value };
    assert.deepEqual(Object.keys(a).sort(), Object.keys(expected).sort(), `${at}'s keys`);
    for (const [k, e] of Object.entries(expected)) same(a[k] ?? null, e, `${at}.${k}`);
  } else {
    assert.equal(actual, expected, at);
  }
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const bytes = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, "hex"));

function encodeMessage(schema: Schema, value: Value): Uint8Array {
  const w = new Writer();
  w.byte(VERSION);
  encode(w, schema, value);
  return w.bytes();
}

test("the vectors are of this client's wire version", () => {
  assert.equal(golden.version, VERSION);
});

for (const [kind, schema, vectors] of [
  ["request", REQUEST_HEADER, golden.requests],
  ["reply", REPLY, golden.replies],
] as const) {
  test(`every ${kind} vector encodes to its bytes and decodes to its value (${vectors.length})`, () => {
    assert.ok(vectors.length > 10);
    for (const vector of vectors) {
      const value = revive(vector.value);
      assert.equal(hex(encodeMessage(schema, value)), vector.hex, `${vector.name} encodes as Rust does`);
      const decoded = decodeMessage(bytes(vector.hex), schema);
      same(decoded.value, value, vector.name);
      assert.equal(decoded.payload.length, 0, `${vector.name}: nothing after the header`);
    }
  });
}

test("the replies a browser does not read are refused cleanly", () => {
  for (const vector of golden.unread_replies) {
    assert.throws(() => decodeMessage(bytes(vector.hex), REPLY), DecodeError, vector.name);
  }
});

test("a lost reply ends the session for exactly the operations Rust's does", () => {
  assert.deepEqual([...HOLDS_ON_NODE].sort(), golden.holds_on_node);
});

test("another wire version is refused, naming both", () => {
  const message = bytes(golden.replies[0]?.hex ?? "");
  message[0] = VERSION + 1;
  const refusal = new RegExp(`wire version ${VERSION + 1}, this client speaks ${VERSION}`);
  assert.throws(() => decodeMessage(message, REPLY), refusal);
});

/** A small deterministic generator (xorshift32), so a failure replays. */
function random(seed: number): () => number {
  let x = seed || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_0000_0000;
  };
}

test("hostile bytes give a DecodeError, nothing else", () => {
  const next = random(0x5eed);
  const all = [...golden.replies, ...golden.requests].map((v) => bytes(v.hex));
  const check = (message: Uint8Array, schema: Schema) => {
    try {
      decode(new Reader(message), schema);
    } catch (e) {
      assert.ok(e instanceof DecodeError, `${hex(message)}: ${String(e)}`);
    }
  };
  for (const message of all) {
    for (let length = 0; length < message.length; length++) check(message.subarray(1, length), REPLY);
  }
  for (let i = 0; i < 20_000; i++) {
    const message = (all[Math.floor(next() * all.length)] ?? new Uint8Array()).slice(1);
    for (let flips = 1 + Math.floor(next() * 4); flips > 0; flips--) {
      message[Math.floor(next() * message.length)] = Math.floor(next() * 256);
    }
    check(message, REPLY);
    check(message, REQUEST_HEADER);
  }
});
