import assert from "node:assert/strict";
import { test } from "node:test";

import { StampedeError } from "../src/errors.js";
import { decodeNpy, encodeNpy, toRgba, type NdArray, type NpyData } from "../src/npy.js";

/** `np.save` of `np.arange(6, dtype=np.uint8).reshape(2, 3)`, version 1.0, as NumPy wrote it. */
const NUMPY_U1_2X3 = Uint8Array.from(
  Buffer.from(
    "934e554d5059010076007b276465736372273a20277c7531272c2027666f727472616e5f6f72646572273a2046616c73652c" +
      "20277368617065273a2028322c2033292c207d20202020202020202020202020202020202020202020202020202020202020" +
      "2020202020202020202020202020202020202020202020202020200a000102030405",
    "hex",
  ),
);

/** A `.npy` file with `dict` as its header (padded to 64 bytes) and `data` after it. */
function npyFile(dict: string, data: Uint8Array | number, version = 1): Uint8Array {
  const text = new TextEncoder().encode(dict);
  const prefix = version === 1 ? 10 : 12;
  const total = Math.ceil((prefix + text.length + 1) / 64) * 64;
  const body = typeof data === "number" ? new Uint8Array(data).map((_, k) => k * 7) : data;
  const out = new Uint8Array(total + body.length).fill(0x20, prefix, total - 1);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, version, 0]);
  const view = new DataView(out.buffer);
  if (version === 1) view.setUint16(8, total - prefix, true);
  else view.setUint32(8, total - prefix, true);
  out.set(text, prefix);
  out[total - 1] = 0x0a;
  out.set(body, total);
  return out;
}

const dictOf = (descr: string, shape: string, fortran = "False") =>
  `{'descr': ${descr}, 'fortran_order': ${fortran}, 'shape': ${shape}, }`;

/** Passes when `run` throws an InvalidArgument StampedeError (whose message matches `reason`). */
function assertInvalid(run: () => unknown, reason?: RegExp): void {
  assert.throws(run, (e: unknown) => {
    assert.ok(e instanceof StampedeError, `not a StampedeError: ${String(e)}`);
    assert.equal(e.kind, "InvalidArgument");
    if (reason) assert.match(e.message, reason);
    return true;
  });
}

const values = (data: NpyData) => Array.from(data as ArrayLike<number | bigint>);

const SAMPLES: [string, NpyData][] = [
  ["|i1", new Int8Array([-128, -1, 0, 1, 127])],
  ["|u1", new Uint8Array([0, 1, 128, 255])],
  ["<i2", new Int16Array([-32768, -1, 0, 32767])],
  ["<u2", new Uint16Array([0, 1, 65535])],
  ["<i4", new Int32Array([-(2 ** 31), -1, 0, 2 ** 31 - 1])],
  ["<u4", new Uint32Array([0, 1, 2 ** 32 - 1])],
  ["<f4", new Float32Array([-1.5, 0, 3.25, Infinity, NaN])],
  ["<f8", new Float64Array([-1e300, -0, Math.PI, 5e-324, NaN])],
  ["<i8", new BigInt64Array([-(2n ** 63n), -1n, 0n, 2n ** 63n - 1n])],
  ["<u8", new BigUint64Array([0n, 1n, 2n ** 64n - 1n])],
];

test("every typed dtype round trips with its shape", () => {
  for (const [dtype, data] of SAMPLES) {
    for (const shape of [undefined, [1, data.length], [data.length, 1, 1]]) {
      const file = encodeNpy(data, shape);
      assert.equal(file.length % 64, data.byteLength % 64, `${dtype}: the data starts at a multiple of 64`);
      const array = decodeNpy(file);
      assert.equal(array.dtype, dtype);
      assert.deepEqual(array.shape, shape ?? [data.length]);
      assert.equal(array.fortranOrder, false);
      assert.equal(array.typed, true);
      assert.equal(array.data.constructor, data.constructor);
      assert.deepEqual(values(array.data), values(data));
    }
  }
});

test("0-d and empty arrays round trip", () => {
  const scalar = decodeNpy(encodeNpy(new Float64Array([2.5]), []));
  assert.deepEqual(scalar.shape, []);
  assert.deepEqual(values(scalar.data), [2.5]);
  for (const shape of [[0], [2, 0, 3], [0, 0]]) {
    for (const [dtype, data] of SAMPLES) {
      const empty = decodeNpy(encodeNpy(data.subarray(0, 0), shape));
      assert.deepEqual(empty.shape, shape);
      assert.equal(empty.dtype, dtype);
      assert.equal(empty.data.length, 0);
    }
  }
});

test("decodes the bytes NumPy wrote", () => {
  const array = decodeNpy(NUMPY_U1_2X3);
  assert.deepEqual(array, {
    dtype: "|u1",
    shape: [2, 3],
    fortranOrder: false,
    data: new Uint8Array([0, 1, 2, 3, 4, 5]),
    typed: true,
  });
});

test("encodes byte for byte what NumPy writes", () => {
  assert.deepEqual(encodeNpy(new Uint8Array([0, 1, 2, 3, 4, 5]), [2, 3]), NUMPY_U1_2X3);
  const text = (file: Uint8Array) => Buffer.from(file.subarray(10, file.indexOf(0x0a) + 1)).toString("latin1");
  // NumPy writes a 1-d shape as (n,), a 0-d one as (), and pads the dict 21 - digits of axis 0
  // spaces before aligning; an already aligned header still gets 64 more bytes.
  const start = "^\\{'descr': '<f4', 'fortran_order': False, 'shape': ";
  assert.match(text(encodeNpy(new Float32Array(7))), new RegExp(`${start}\\(7,\\), \\} {20,}\n$`));
  assert.match(text(encodeNpy(new Float32Array(1), [])), new RegExp(`${start}\\(\\), \\} +\n$`));
  for (let n = 0; n < 40; n++) {
    const file = encodeNpy(new Uint8Array(n === 0 ? 1 : 0), Array.from({ length: n }, () => 0));
    const header = file.length - (n === 0 ? 1 : 0);
    assert.equal(header % 64, 0);
    const dict = text(file).trimEnd();
    const growth = n > 0 ? 20 : 0;
    const unpadded = 10 + dict.length + growth + 1;
    assert.equal(header, unpadded + 64 - (unpadded % 64), `ndim ${n}`);
  }
});

test("encodeNpy refuses a shape that does not fit the data", () => {
  assertInvalid(() => encodeNpy(new Float32Array(6), [4, 2]), /shape \(4, 2\) holds 8 elements but the data has 6/);
  assertInvalid(() => encodeNpy(new Float32Array(6), [-2, -3]), /non-negative integers/);
  assertInvalid(() => encodeNpy(new Float32Array(6), [2.5, 2.4]), /non-negative integers/);
  assertInvalid(() => encodeNpy(new Float32Array(1), Array.from({ length: 30000 }, () => 1)), /more than version 1.0/);
  assertInvalid(() => encodeNpy([1, 2] as unknown as Float32Array), /not one of the typed arrays/);
});

test("misaligned data is copied into an aligned typed array; aligned data is viewed", () => {
  const data = new Float64Array([1.5, -2.25, 1e100]);
  const file = encodeNpy(data, [3]);
  for (const offset of [1, 3, 4, 7]) {
    const buffer = new Uint8Array(file.length + offset);
    buffer.set(file, offset);
    const array = decodeNpy(buffer.subarray(offset));
    assert.ok(array.data instanceof Float64Array);
    assert.equal(array.data.byteOffset % 8, 0);
    assert.deepEqual(values(array.data), values(data));
  }
  const buffer = new Uint8Array(file.length + 8);
  buffer.set(file, 8);
  const viewed = decodeNpy(buffer.subarray(8));
  assert.equal(viewed.data.buffer, buffer.buffer, "aligned data is not copied");
  assert.equal(viewed.data.byteOffset, 8 + file.length - data.byteLength);
});

test("dtypes without a typed array come back as bytes", () => {
  const cases: [string, string, number][] = [
    ["'|b1'", "|b1", 3],
    ["'<f2'", "<f2", 6],
    ["'>i4'", ">i4", 12],
    ["'>f8'", ">f8", 24],
    ["'<c16'", "<c16", 48],
    ["'<U2'", "<U2", 24],
    ["'<M8[ns]'", "<M8[ns]", 24],
    ["[('x', '<f4'), ('y', '|u1')]", "[('x', '<f4'), ('y', '|u1')]", 15],
    ["[('a', '<i4'), ('b', '<f8', (2,))]", "[('a', '<i4'), ('b', '<f8', (2,))]", 60],
  ];
  for (const [descr, dtype, bytes] of cases) {
    const file = npyFile(dictOf(descr, "(3,)"), bytes);
    const array = decodeNpy(file);
    assert.equal(array.dtype, dtype);
    assert.equal(array.typed, false, dtype);
    assert.ok(array.data instanceof Uint8Array);
    assert.deepEqual(array.data, file.subarray(file.length - bytes));
  }
  // One byte has no byte order: these are typed.
  assert.equal(decodeNpy(npyFile(dictOf("'>u1'", "(2,)"), 2)).typed, true);
  assert.equal(decodeNpy(npyFile(dictOf("'=i4'", "(2,)"), 8)).data.constructor, Int32Array);
});

test("reads versions 2.0 and 3.0, Fortran order and NumPy's other spellings", () => {
  const v2 = decodeNpy(npyFile(dictOf('"<u2"', "(2, 2)", "True"), new Uint8Array([1, 0, 2, 0, 3, 0, 4, 1]), 2));
  const data = new Uint16Array([1, 2, 3, 260]);
  assert.deepEqual(v2, { dtype: "<u2", shape: [2, 2], fortranOrder: true, data, typed: true });
  const v3 = decodeNpy(npyFile(dictOf("[('température', '<f4')]", "(2,)"), 8, 3));
  assert.equal(v3.dtype, "[('température', '<f4')]");
  const spaced = npyFile("{ 'shape' : ( 2 , ) ,\n'descr':('<i2'),'fortran_order':False}", 4);
  assert.deepEqual(decodeNpy(spaced).shape, [2]);
  const titled = npyFile(dictOf("[(('a title', 'x'), '<i4'), ('', '|V4'), ('y', [('z', '<u2', 3)])]", "()"), 14);
  assert.equal(decodeNpy(titled).typed, false);
});

test("malformed payloads are refused with the rule they break", () => {
  const f4 = (dict: string, data = 8, version = 1) => () => decodeNpy(npyFile(dict, data, version));
  const good = encodeNpy(new Float32Array(2));
  assertInvalid(() => decodeNpy(new Uint8Array(0)), /bad magic/);
  assertInvalid(() => decodeNpy(Uint8Array.from([0x00, 0x11, 0x22, 0x33])), /bad magic/);
  assertInvalid(() => decodeNpy(Uint8Array.from(good).fill(4, 6, 7)), /unsupported version 4.0/);
  assertInvalid(() => decodeNpy(Uint8Array.from(good).fill(1, 7, 8)), /unsupported version 1.1/);
  assertInvalid(() => decodeNpy(Uint8Array.from(good).fill(0xff, 8, 10)), /65545 bytes, over the limit of 65536/);
  const truncated = /truncated: the header declares 16512 bytes but the payload has 136/;
  assertInvalid(() => decodeNpy(Uint8Array.from(good).fill(0x40, 9, 10)), truncated);
  assertInvalid(() => decodeNpy("nope" as unknown as Uint8Array), /Uint8Array/);
  assertInvalid(f4("['<f4', False, (2,)]"), /not a dict/);
  assertInvalid(f4("{'descr': '<f4', 'shape': (2,), }"), /no 'fortran_order'/);
  assertInvalid(f4(dictOf("'<f4'", "(2,)").replace("}", "'extra': 1}")), /unknown key 'extra'/);
  assertInvalid(f4(dictOf("'<f4'", "(2,)").replace("}", "'shape': (2,)}")), /'shape' twice/);
  assertInvalid(f4(dictOf("'<f4'", "(2,)", "0")), /'fortran_order' is 0, not a bool/);
  assertInvalid(f4(dictOf("'<f4'", "(2)")), /'shape' is 2, not a tuple of non-negative integers/);
  assertInvalid(f4(dictOf("'<f4'", "[2]")), /not a tuple/);
  assertInvalid(f4(dictOf("'<f4'", "(-2,)")), /not a tuple of non-negative integers/);
  assertInvalid(f4(dictOf("'<f4'", "(2, 1.5)")), /not a Python literal/);
  assertInvalid(f4(dictOf("'<f4'", "(99999999999999999999,)")), /larger than 2\^53/);
  assertInvalid(f4(dictOf("'<f4'", "(4294967296, 4294967296)")), /more elements than fit/);
  assertInvalid(f4(dictOf("'<f8'", "(4503599627370496,)")), /overflows memory/);
  assertInvalid(f4(dictOf("'<f4'", "(3,)")), /says 12 data bytes .* but 8 follow/);
  assertInvalid(f4(dictOf("'<f4'", "(1,)")), /says 4 data bytes .* but 8 follow/);
  assertInvalid(f4(dictOf("'|O'", "(1,)")), /holds Python objects/);
  assertInvalid(f4(dictOf("[('a', '<i4'), ('b', [('c', '|O')])]", "(0,)")), /holds Python objects/);
  assertInvalid(f4(dictOf("'<f3'", "(2,)")), /kind 'f' has sizes/);
  assertInvalid(f4(dictOf("'<q8'", "(2,)")), /unknown kind/);
  assertInvalid(f4(dictOf("'<f4[s]'", "(2,)")), /only datetimes/);
  assertInvalid(f4(dictOf("[('a', '<f4'), ('a', '<f4')]", "(1,)")), /appears twice/);
  assertInvalid(f4(dictOf("[('a',)]", "(1,)")), /a field is a/);
  assertInvalid(f4(dictOf("5", "(1,)")), /neither a type string/);
  assertInvalid(f4(dictOf("'<f4'", "(2,)") + "x"), /text after the dict/);
  assertInvalid(f4(dictOf("'<f4'", "(2,)").slice(0, -3)), /not a Python literal/);
  assertInvalid(f4("{'descr': '<f4"), /unterminated string/);
  assertInvalid(f4(dictOf("'<f\\q4'", "(2,)")), /unsupported escape/);
  assertInvalid(f4(dictOf("'\\U00110000'", "(2,)")), /past U\+10FFFF/);
  assertInvalid(f4(dictOf("[('a\\'b', '<f4'), ('a\\x27b', '<f4')]", "(1,)")), /field name "a'b" appears twice/);
  assertInvalid(f4(`\ufeff${dictOf("'<f4'", "(2,)")}`, 8, 3), /unexpected "\ufeff"/);
  assertInvalid(f4(dictOf("'<f4'", `${"(".repeat(8)}2,${")".repeat(8)}`)), /nests deeper/);
  assertInvalid(f4(dictOf("'<f4'", `${"(".repeat(5000)}`)), /nests deeper/);
  assertInvalid(f4(dictOf("'é'", "(2,)")), /version 1.0 header is ASCII/);
  const invalidUtf8 = npyFile(dictOf("'<f4'", "(2,)"), 8, 3);
  invalidUtf8[20] = 0xff;
  assertInvalid(() => decodeNpy(invalidUtf8), /UTF-8/);
  const noNewline = npyFile(dictOf("'<f4'", "(2,)"), 8);
  noNewline[noNewline.indexOf(0x0a)] = 0x20;
  assertInvalid(() => decodeNpy(noNewline), /does not end with a newline/);
});

test("toRgba draws grey, RGB and RGBA |u1 images", () => {
  const image = (shape: number[], bytes: number[]): NdArray => decodeNpy(encodeNpy(new Uint8Array(bytes), shape));
  assert.deepEqual(toRgba(image([1, 2], [10, 200])), {
    width: 2,
    height: 1,
    rgba: new Uint8ClampedArray([10, 10, 10, 255, 200, 200, 200, 255]),
  });
  assert.deepEqual(toRgba(image([2, 1, 3], [1, 2, 3, 4, 5, 6])), {
    width: 1,
    height: 2,
    rgba: new Uint8ClampedArray([1, 2, 3, 255, 4, 5, 6, 255]),
  });
  const rgba = new Uint8ClampedArray([9, 8, 7, 6]);
  assert.deepEqual(toRgba(image([1, 1, 4], [9, 8, 7, 6])), { width: 1, height: 1, rgba });
  assert.deepEqual(toRgba(image([0, 5], [])), { width: 5, height: 0, rgba: new Uint8ClampedArray(0) });
});

test("toRgba refuses what is not a drawable image", () => {
  const drawable = /\|u1 in C order of shape \(H, W\), \(H, W, 3\) or \(H, W, 4\)/;
  assertInvalid(() => toRgba(decodeNpy(encodeNpy(new Float32Array(4), [2, 2]))), drawable);
  assertInvalid(() => toRgba(decodeNpy(encodeNpy(new Uint8Array(8), [2, 2, 2]))), drawable);
  assertInvalid(() => toRgba(decodeNpy(encodeNpy(new Uint8Array(4), [4]))), drawable);
  assertInvalid(() => toRgba(decodeNpy(encodeNpy(new Uint8Array(4), [1, 1, 1, 4]))), drawable);
  assertInvalid(() => toRgba(decodeNpy(npyFile(dictOf("'|b1'", "(2, 2)"), 4))), drawable);
  assertInvalid(() => toRgba(decodeNpy(npyFile(dictOf("'|u1'", "(2, 2)", "True"), 4))), /Fortran order/);
  const lying: NdArray = { dtype: "|u1", shape: [100, 100], fortranOrder: false, data: new Uint8Array(3), typed: true };
  assertInvalid(() => toRgba(lying), /holds 3 bytes, not 100 × 100 × 1/);
});

/** Valid payloads of several kinds, for the hostile-input tests. */
const SEEDS = [
  NUMPY_U1_2X3,
  encodeNpy(new Float64Array([1, 2, 3, 4]), [2, 2]),
  encodeNpy(new Int16Array(0), [0, 3]),
  npyFile(dictOf("[('x', '<f4'), ('y', [('z', '<u2', (3, 2))]), ('', '|V2')]", "(2,)"), 36),
  npyFile(dictOf("'<M8[10ms]'", "(1, 1)", "True"), 8, 2),
  npyFile(dictOf("[('é', '<U1')]", "()"), 4, 3),
];

/** Decodes (true) or refuses (false) as the contract says; a decoded array fits its input. */
function decodesOrRefuses(payload: Uint8Array): boolean {
  let array: NdArray;
  try {
    array = decodeNpy(payload);
  } catch (e) {
    assert.ok(e instanceof StampedeError, `not a StampedeError: ${String(e)}`);
    assert.equal(e.kind, "InvalidArgument");
    return false;
  }
  assert.ok(array.data.byteLength <= payload.length);
  if (array.typed) assert.equal(array.data.length, array.shape.reduce((n, d) => n * d, 1));
  return true;
}

test("every truncation of a valid payload is refused", () => {
  for (const seed of SEEDS) {
    decodeNpy(seed);
    for (let length = 0; length < seed.length; length++) {
      assertInvalid(() => decodeNpy(seed.subarray(0, length)));
    }
  }
});

test("seeded random mutations decode or throw InvalidArgument, nothing else", () => {
  // mulberry32: small, deterministic, good enough to spread edits over the header.
  let state = 0x5eed;
  const random = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const below = (n: number) => Math.floor(random() * n);
  const syntax = Buffer.from("'\"()[]{},:0123456789-<>|=ifuUObcSVmM\\ \nTrueFalseNone");
  let decoded = 0;
  for (let round = 0; round < 4000; round++) {
    let bytes = Array.from(SEEDS[below(SEEDS.length)]!);
    for (let edits = 1 + below(3); edits > 0; edits--) {
      const at = below(bytes.length + 1);
      switch (below(6)) {
        case 0: bytes[at] = (bytes[at] ?? 0) ^ (1 + below(255)); break;
        case 1: bytes[Math.min(at, 10 + below(80))] = syntax[below(syntax.length)]!; break;
        case 2: bytes.splice(at, 0, syntax[below(syntax.length)]!); break;
        case 3: bytes.splice(at, 1); break;
        case 4: bytes = bytes.slice(0, at); break;
        default: bytes.splice(at, 0, ...Buffer.from(String(2 ** below(64)))); break;
      }
    }
    if (decodesOrRefuses(Uint8Array.from(bytes))) decoded++;
  }
  assert.ok(decoded > 0, "some mutations (in padding or data) still decode");
});
