/**
 * The `postcard` encoding Stampede's wire uses (the Rust crate `postcard` 1.x), driven by a
 * schema: each wire type is described once as data (`wire.ts`), and one encoder and one decoder
 * walk it. Values have the shape `serde_json` gives the Rust types (an enum is `"Unit"` or
 * `{ Variant: value }`, an `Option` is `null` or its value), so the golden vectors written by the
 * Rust side (`tests/vectors/wire.json`) compare directly.
 *
 * Guarantees:
 * - Decoding never throws anything but a {@link DecodeError}, whatever the bytes, and allocates
 *   nothing larger than the input: a length is checked against the bytes left before it is used.
 * - Integers are exact: a `u64` or `i64` beyond JavaScript's safe integers is refused (a
 *   `DecodeError` on the way in, a `RangeError` on the way out), but for the two that are always
 *   a `bigint` — `ts`, a timestamp (an `i64`: nanoseconds since 1970 exceed 2^53, and
 *   Stampede's `INFINITY` is `i64::MAX`), and `u64big`, an id. Either takes a safe integer
 *   `number` too.
 */

/** How a wire type is written. */
export type Schema =
  | "u8"
  | "u16"
  | "u32"
  | "u64"
  | "u64big"
  | "i64"
  | "ts"
  | "bool"
  | "string"
  | "unit"
  | { readonly option: Schema }
  | { readonly vec: Schema }
  | { readonly bytes: number }
  | { readonly tuple: readonly Schema[] }
  | { readonly struct: Fields }
  | { readonly enum: Variants }
  | { readonly unsupported: string };

/** A struct's fields, in declaration order. */
export type Fields = ReadonlyArray<readonly [string, Schema]>;

/** An enum's variants, in declaration order: `null` for a unit variant. */
export type Variants = ReadonlyArray<readonly [string, Schema | null]>;

/** A value as its schema describes it. */
export type Value = null | boolean | number | bigint | string | Value[] | { [key: string]: Value };

/** Bytes that are not a value of the schema: too short, a bad tag, an integer out of range. */
export class DecodeError extends Error {
  override readonly name = "DecodeError";
}

const I64_MAX = (1n << 63n) - 1n;
const U64_MAX = (1n << 64n) - 1n;

/** Longest varint: a `u64` in 7-bit groups. */
const VARINT_BYTES_MAX = 10;

export class Writer {
  private buffer = new Uint8Array(256);
  private length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + n));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }

  byte(b: number): void {
    this.reserve(1);
    this.buffer[this.length++] = b;
  }

  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  varint(n: bigint): void {
    if (n < 0n || n > U64_MAX) throw new RangeError(`${n} is outside u64`);
    do {
      const low = Number(n & 0x7fn);
      n >>= 7n;
      this.byte(n === 0n ? low : low | 0x80);
    } while (n !== 0n);
  }

  bytes(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}

export class Reader {
  private at = 0;

  constructor(private readonly input: Uint8Array) {}

  byte(): number {
    const b = this.input[this.at];
    if (b === undefined) throw new DecodeError("the message ends early");
    this.at += 1;
    return b;
  }

  take(n: number): Uint8Array {
    if (n > this.input.length - this.at) throw new DecodeError(`${n} bytes announced, ${this.left()} left`);
    const taken = this.input.subarray(this.at, this.at + n);
    this.at += n;
    return taken;
  }

  varint(): bigint {
    let n = 0n;
    for (let i = 0; i < VARINT_BYTES_MAX; i++) {
      const b = this.byte();
      n |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) {
        if (n > U64_MAX) throw new DecodeError("a varint beyond u64");
        return n;
      }
    }
    throw new DecodeError("a varint longer than a u64's");
  }

  left(): number {
    return this.input.length - this.at;
  }

  /** What follows the value read so far: a message's payload. */
  rest(): Uint8Array {
    return this.input.subarray(this.at);
  }
}

function safe(n: bigint, what: string): number {
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new DecodeError(`${what} ${n} is beyond JavaScript's safe integers`);
  }
  return Number(n);
}

function integer(value: Value, what: string): bigint {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  throw new RangeError(`${what}: ${String(value)} is not a safe integer`);
}

const zigzag = (n: bigint): bigint => (n < 0n ? (-n << 1n) - 1n : n << 1n);
const unzigzag = (n: bigint): bigint => (n & 1n ? -((n + 1n) >> 1n) : n >> 1n);

function record(value: Value, what: string): { [key: string]: Value } {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new RangeError(`${what}: expected an object, got ${JSON.stringify(String(value))}`);
  }
  return value;
}

/** Writes `value` as `schema` says. A value of the wrong shape is a `RangeError`. */
export function encode(w: Writer, schema: Schema, value: Value): void {
  switch (schema) {
    case "u8":
    case "u16":
    case "u32": {
      const n = integer(value, schema);
      const max = schema === "u8" ? 0xffn : schema === "u16" ? 0xffffn : 0xffffffffn;
      if (n < 0n || n > max) throw new RangeError(`${n} is outside ${schema}`);
      return schema === "u8" ? w.byte(Number(n)) : w.varint(n);
    }
    case "u64":
    case "u64big":
      return w.varint(integer(value, schema));
    case "i64":
      return w.varint(zigzag(integer(value, schema)));
    case "ts": {
      const ts = integer(value, "a timestamp");
      if (ts > I64_MAX || ts < -I64_MAX - 1n) throw new RangeError(`${ts} is outside i64`);
      return w.varint(zigzag(ts));
    }
    case "bool":
      if (typeof value !== "boolean") throw new RangeError(`expected a boolean, got ${String(value)}`);
      return w.byte(value ? 1 : 0);
    case "string": {
      if (typeof value !== "string") throw new RangeError(`expected a string, got ${String(value)}`);
      const utf8 = new TextEncoder().encode(value);
      w.varint(BigInt(utf8.length));
      return w.raw(utf8);
    }
    case "unit":
      return;
  }
  if ("option" in schema) {
    if (value === null || value === undefined) return w.byte(0);
    w.byte(1);
    return encode(w, schema.option, value);
  }
  if ("vec" in schema) {
    if (!Array.isArray(value)) throw new RangeError(`expected an array, got ${String(value)}`);
    w.varint(BigInt(value.length));
    for (const element of value) encode(w, schema.vec, element);
    return;
  }
  if ("bytes" in schema) {
    if (!Array.isArray(value) || value.length !== schema.bytes) throw new RangeError(`expected ${schema.bytes} bytes`);
    for (const b of value) encode(w, "u8", b);
    return;
  }
  if ("tuple" in schema) {
    if (!Array.isArray(value) || value.length !== schema.tuple.length) throw new RangeError("a tuple of the wrong length");
    schema.tuple.forEach((element, i) => encode(w, element, value[i] ?? null));
    return;
  }
  if ("struct" in schema) {
    const fields = record(value, "a struct");
    for (const [name, field] of schema.struct) encode(w, field, fields[name] ?? null);
    return;
  }
  if ("enum" in schema) {
    const [name, inner] = typeof value === "string" ? [value, null] : (Object.entries(record(value, "an enum"))[0] ?? []);
    const index = schema.enum.findIndex(([variant]) => variant === name);
    const variant = schema.enum[index];
    if (variant === undefined || name === undefined) throw new RangeError(`no variant ${String(name)}`);
    w.varint(BigInt(index));
    if (variant[1] !== null) encode(w, variant[1], inner ?? null);
    return;
  }
  throw new RangeError(`this client does not send ${schema.unsupported}`);
}

/** Reads a value of `schema`. Bytes that are not one are a {@link DecodeError}. */
export function decode(r: Reader, schema: Schema): Value {
  switch (schema) {
    case "u8":
      return r.byte();
    case "u16":
    case "u32": {
      const n = r.varint();
      if (n > (schema === "u16" ? 0xffffn : 0xffffffffn)) throw new DecodeError(`${n} is outside ${schema}`);
      return Number(n);
    }
    case "u64":
      return safe(r.varint(), "a u64");
    case "u64big":
      return r.varint();
    case "i64":
      return safe(unzigzag(r.varint()), "an i64");
    case "ts":
      return unzigzag(r.varint());
    case "bool": {
      const b = r.byte();
      if (b > 1) throw new DecodeError(`${b} is not a boolean`);
      return b === 1;
    }
    case "string": {
      const length = r.varint();
      if (length > BigInt(r.left())) throw new DecodeError(`a string of ${length} bytes, ${r.left()} left`);
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(r.take(Number(length)));
      } catch {
        throw new DecodeError("a string that is not UTF-8");
      }
    }
    case "unit":
      return null;
  }
  if ("option" in schema) {
    const tag = r.byte();
    if (tag > 1) throw new DecodeError(`${tag} is not an option's tag`);
    return tag === 0 ? null : decode(r, schema.option);
  }
  if ("vec" in schema) {
    const length = r.varint();
    // Every element takes a byte at least (but a unit's): no longer than the bytes left.
    if (length > BigInt(r.left())) throw new DecodeError(`${length} elements announced, ${r.left()} bytes left`);
    return Array.from({ length: Number(length) }, () => decode(r, schema.vec));
  }
  if ("bytes" in schema) return Array.from(r.take(schema.bytes));
  if ("tuple" in schema) return schema.tuple.map((element) => decode(r, element));
  if ("struct" in schema) {
    const value: { [key: string]: Value } = {};
    for (const [name, field] of schema.struct) value[name] = decode(r, field);
    return value;
  }
  if ("enum" in schema) {
    const index = r.varint();
    const variant = index < BigInt(schema.enum.length) ? schema.enum[Number(index)] : undefined;
    if (variant === undefined) throw new DecodeError(`${index} is no variant (${schema.enum.length} exist)`);
    const [name, inner] = variant;
    return inner === null ? name : { [name]: decode(r, inner) };
  }
  throw new DecodeError(`the node sent ${schema.unsupported}, which this client does not read`);
}
