/**
 * NumPy `.npy` payloads in the browser (docs/SEMANTICS.md, "npy payloads"), by the rules every other client
 * applies (`stampede::npy`): an item a put accepted decodes here, and what a put refuses is refused here.
 *
 * - {@link decodeNpy} accepts exactly: format 1.0, 2.0 or 3.0; a header of at most 64 KiB, ASCII (UTF-8 in 3.0),
 *   ending with a newline and nesting brackets at most 8 deep; a dict with exactly `descr`, `fortran_order` (a
 *   bool) and `shape` (a tuple of non-negative integers); a dtype as NumPy writes it, holding no Python objects;
 *   then exactly elements × item size bytes of data. Any other input, hostile or not, throws a `StampedeError` of
 *   kind `InvalidArgument` whose reason names the rule broken, and never anything else. The parse is one pass over
 *   the header with recursion bounded by the nesting limit, so no input makes it hang; no size the payload declares
 *   is allocated before it is checked against the bytes actually there, so nothing is larger than the input.
 * - The data is a view of the input (zero-copy) unless a typed array would be misaligned; then it is a copy.
 * - {@link encodeNpy} writes the very bytes NumPy's `np.save` writes for a C-order array.
 * - {@link toRgba} and {@link drawNpy} show `|u1` images of shape (H, W), (H, W, 3) or (H, W, 4).
 *
 * Typed arrays have the machine's byte order. Every current browser is little-endian; on a big-endian one,
 * multi-byte dtypes would come back untyped and be written as `>`, so nothing is ever misread.
 */

import { invalidArgument } from "./errors.js";

/** The typed arrays a `.npy` payload may be viewed as (`Uint8Array` also holds untyped data). */
export type NpyData = Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array
  | Float32Array | Float64Array | BigInt64Array | BigUint64Array;

/** A decoded `.npy` array. */
export interface NdArray {
  /** The descr without its quotes (`<f4`, `|u1`); for any other dtype, the header's literal text. */
  dtype: string;
  shape: number[];
  /** `true` if the data is in Fortran (column-major) order. */
  fortranOrder: boolean;
  /** A typed array when {@link NdArray.typed}, otherwise the raw data bytes. */
  data: NpyData;
  /** `false` when no typed array holds the dtype (bool, float16, big-endian, complex, structured, …). */
  typed: boolean;
}

/** An image for a canvas. */
export interface Rgba {
  width: number;
  height: number;
  rgba: Uint8ClampedArray<ArrayBuffer>;
}

/** As `stampede::npy::HEADER_BYTES_MAX`: it bounds the parse, and NumPy itself writes far smaller headers. */
const HEADER_BYTES_MAX = 64 * 1024;
/** As `stampede::npy::NESTING_MAX`; here it also bounds the parser's recursion. */
const NESTING_MAX = 8;
const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];
/** NumPy's ARRAY_ALIGN and GROWTH_AXIS_MAX_DIGITS, which decide its padding. */
const ALIGN = 64;
const GROWTH_DIGITS = 21;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function fail(reason: string): never {
  throw invalidArgument("npy", "payload", reason);
}

/** At most 60 characters of text from the input: a hostile header must not make a huge message. */
function clip(text: string): string {
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** A shape as Python's repr writes it: `(7,)` for one dimension. */
function pyShape(dims: readonly number[]): string {
  return dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(", ")})`;
}

type TypedCtor = { new (buffer: ArrayBufferLike, offset?: number, count?: number): NpyData; BYTES_PER_ELEMENT: number };
const TYPED: Record<string, TypedCtor> = {
  i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array, i4: Int32Array,
  u4: Uint32Array, f4: Float32Array, f8: Float64Array, i8: BigInt64Array, u8: BigUint64Array,
};
const CODES: Record<string, string> = Object.fromEntries(Object.entries(TYPED).map(([code, c]) => [c.name, code]));

/** The typed array for a plain descr, if this machine can view the data as one. */
function typedFor(dtype: string): TypedCtor | undefined {
  const match = /^([<>|=]?)([iuf][1248])$/.exec(dtype);
  const ctor = match ? TYPED[match[2]!] : undefined;
  if (ctor === undefined || ctor.BYTES_PER_ELEMENT === 1) return ctor; // one byte has no byte order
  return (match![1] === "<" || match![1] === "=") && LITTLE_ENDIAN ? ctor : undefined;
}

// A typed array's intrinsic name: unlike `instanceof` it works across realms, and unlike a property it cannot
// be faked by a plain object or changed by a subclass such as Node's Buffer.
const tagOf = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Int8Array.prototype), Symbol.toStringTag)!.get!;
function typedName(value: unknown): string | undefined {
  return ArrayBuffer.isView(value) ? (tagOf.call(value) as string | undefined) : undefined;
}

// Buffer's own `slice` is a view; the typed arrays' one copies, which is what is needed here.
const copyOf = (bytes: Uint8Array, from: number, to?: number) => Uint8Array.prototype.slice.call(bytes, from, to);

/** A Python literal of the kinds a header holds, with where it lies in the header's text. */
type Py = { at: number; end: number } & ({ t: "str"; v: string } | { t: "int"; v: number } | { t: "bool"; v: boolean }
  | { t: "none" } | { t: "tuple" | "list"; items: Py[] } | { t: "dict"; entries: [Py, Py][] });

const CLOSE: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
const ESCAPE = /\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[^])/g;
const ESCAPES: Record<string, string> = { "\\": "\\", "'": "'", '"': '"', n: "\n", r: "\r", t: "\t" };

/** Parses the Python literals NumPy's repr writes: strict, one pass, no backtracking. */
function parseLiteral(text: string): Py {
  let i = 0;
  const syntax = (why: string): never => fail(`the header is not a Python literal: ${why} at offset ${i}`);
  const space = () => {
    while (i < text.length && " \t\n\r\f".includes(text[i]!)) i++;
  };
  const value = (depth: number): Py => {
    space();
    const at = i;
    const c = text[i];
    if (c === undefined) return syntax("it ends early");
    const close = CLOSE[c];
    if (close !== undefined) {
      if (depth >= NESTING_MAX) fail(`the header dict nests deeper than the limit of ${NESTING_MAX}`);
      i++;
      const items: Py[] = [];
      const entries: [Py, Py][] = [];
      let comma = false;
      for (space(); text[i] !== close; space()) {
        const item = value(depth + 1);
        if (c === "{") {
          space();
          if (text[i++] !== ":") syntax("expected ':'");
          entries.push([item, value(depth + 1)]);
        } else items.push(item);
        space();
        comma = text[i] === ",";
        if (comma) i++;
        else if (text[i] !== close) syntax(`expected ',' or '${close}'`);
      }
      i++;
      if (c === "{") return { t: "dict", entries, at, end: i };
      // `(x)` is x itself in Python; only `(x,)` is a one-element tuple.
      if (c === "(" && items.length === 1 && !comma) return items[0]!;
      return { t: c === "(" ? "tuple" : "list", items, at, end: i };
    }
    if (c === "'" || c === '"') {
      for (i++; text[i] !== c; i += text[i] === "\\" ? 2 : 1) {
        if (i >= text.length || text[i] === "\n") return syntax("unterminated string");
      }
      // Only the escapes Python's repr writes: anything else is not text NumPy wrote.
      const v = text.slice(at + 1, i++).replace(ESCAPE, (_, e: string) => {
        const code = e.length > 1 ? parseInt(e.slice(1), 16) : -1;
        if (code > 0x10ffff) syntax("a \\U escape past U+10FFFF");
        return code >= 0 ? String.fromCodePoint(code) : ESCAPES[e] ?? syntax("unsupported escape in a string");
      });
      return { t: "str", v, at, end: i };
    }
    const number = /^[-+]?([0-9]+)/.exec(text.slice(i, i + 32));
    if (number) {
      const digits = number[1]!;
      if (digits.length > 1 && digits[0] === "0") syntax("an integer with leading zeros");
      if (digits.length > 16 || Number(digits) > Number.MAX_SAFE_INTEGER) syntax("an integer larger than 2^53 - 1");
      i += number[0].length;
      return { t: "int", v: Number(number[0]) + 0, at, end: i }; // + 0 makes -0 a plain 0
    }
    for (const [word, v] of [["True", true], ["False", false], ["None", null]] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v === null ? { t: "none", at, end: i } : { t: "bool", v, at, end: i };
      }
    }
    return syntax(`unexpected ${JSON.stringify(c)}`);
  };
  const top = value(0);
  space();
  if (i !== text.length) syntax("text after the dict");
  return top;
}

/** `a × b` for sizes, refused rather than rounded past 2^53 (or wrapped, as a size_t would). */
function multiply(a: number, b: number, reason: () => string): number {
  const product = a * b;
  return product <= Number.MAX_SAFE_INTEGER ? product : fail(reason());
}

type Size = { size: number; object: boolean };

/** The item size of a descr and whether it holds objects, as `stampede::npy::dtype_size`. */
function dtypeSize(d: Py, text: string): Size {
  if (d.t === "str") return typeSize(d.v);
  if (d.t === "tuple") {
    if (d.items.length !== 2) fail("descr: a subarray is a (descr, shape) pair");
    const inner = dtypeSize(d.items[0]!, text);
    return { size: subarraySize(inner.size, d.items[1]!), object: inner.object };
  }
  if (d.t !== "list") {
    fail(`descr ${clip(text.slice(d.at, d.end))} is neither a type string, a list of fields nor a (descr, shape) pair`);
  }
  let size = 0;
  let object = false;
  const names = new Set<string>();
  for (const field of d.items) {
    const parts = field.t === "tuple" || field.t === "list" ? field.items : [];
    if (parts.length < 2 || parts.length > 3) fail("descr: a field is a (name, descr) or (name, descr, shape) tuple");
    const [first, descr, shape] = parts as [Py, Py, Py?];
    // A (title, name) pair names the field by its second string.
    const name = first.t === "tuple" && first.items.length === 2 ? first.items[1]! : first;
    if (name.t !== "str" || (first.t === "tuple" && first.items[0]!.t !== "str")) {
      fail("descr: a field's name is a string or a (title, name) pair");
    }
    if (name.v !== "" && names.has(name.v)) fail(`descr: field name ${clip(JSON.stringify(name.v))} appears twice`);
    names.add(name.v);
    const inner = dtypeSize(descr, text);
    size += shape === undefined ? inner.size : subarraySize(inner.size, shape);
    if (size > Number.MAX_SAFE_INTEGER) fail("descr: the structure's size overflows");
    object ||= inner.object;
  }
  return { size, object };
}

/** `size` × the product of a subarray shape (an int or a tuple of ints). */
function subarraySize(size: number, shape: Py): number {
  const dims = shape.t === "int" ? [shape] : shape.t === "tuple" ? shape.items : [];
  if (shape.t !== "int" && shape.t !== "tuple") fail("descr: a subarray shape is an int or a tuple of ints");
  return dims.reduce((n, dim) => {
    if (dim.t !== "int" || dim.v < 0) fail("descr: a subarray dimension is not a non-negative integer");
    return multiply(n, dim.v, () => "descr: a subarray's size overflows");
  }, size);
}

/** The sizes each kind may have; an empty list: any size, which must be given. */
const SIZES: Record<string, number[]> = {
  b: [1], i: [1, 2, 4, 8], u: [1, 2, 4, 8], f: [2, 4, 8, 12, 16], c: [8, 16, 24, 32], m: [8], M: [8],
  S: [], U: [], V: [],
};

/** A type string as NumPy writes it (`dtype.str`): byte order, kind, size, and `[unit]` for times. */
function typeSize(typeStr: string): Size {
  const bad = (why: string): never => fail(`descr ${clip(JSON.stringify(typeStr))}: ${why}`);
  const body = /^[<>|=]/.test(typeStr) ? typeStr.slice(1) : typeStr;
  const kind = String.fromCodePoint(body.codePointAt(0) ?? bad("empty type string"));
  const rest = body.slice(kind.length);
  const bracket = rest.indexOf("[");
  const digits = bracket < 0 ? rest : rest.slice(0, bracket);
  if (bracket >= 0) {
    if (kind !== "m" && kind !== "M") bad("only datetimes and timedeltas have a [unit]");
    if (!/^\[[0-9]*(Y|M|W|D|h|m|s|ms|us|ns|ps|fs|as|generic)\]$/.test(rest.slice(bracket))) bad("unknown time unit");
  }
  if (!/^[0-9]*$/.test(digits)) bad("the size is not a number");
  if (digits.length > 15) bad("size too large");
  const size = digits === "" ? undefined : Number(digits);
  if (kind === "O") return size === undefined || size === 8 ? { size: 8, object: true } : bad("an object is a pointer");
  const sizes = SIZES[kind] ?? bad("unknown kind (b i u f c m M S U V O)");
  if (size === undefined || (sizes.length > 0 && !sizes.includes(size))) {
    return bad(sizes.length > 0 ? `kind '${kind}' has sizes [${sizes.join(", ")}]` : "a size is required");
  }
  return { size: kind === "U" ? size * 4 : size, object: false }; // U counts UCS-4 characters
}

/** Magic, version and header length: where the dict starts and where the data starts. */
function preamble(bytes: Uint8Array): { major: number; dictStart: number; dataOffset: number } {
  const magic = bytes.length >= 8 && MAGIC.every((b, k) => bytes[k] === b);
  if (!magic) fail("bad magic: a .npy payload starts with \\x93NUMPY");
  const [major, minor] = [bytes[6]!, bytes[7]!];
  const wide = (major === 2 || major === 3) && minor === 0;
  if (!wide && !(major === 1 && minor === 0)) fail(`unsupported version ${major}.${minor} (1.0, 2.0 and 3.0 are read)`);
  const dictStart = wide ? 12 : 10;
  if (bytes.length < dictStart) fail("truncated: the header length is missing");
  const b = (k: number) => bytes[k]!;
  const dataOffset = dictStart + b(8) + b(9) * 0x100 + (wide ? b(10) * 0x10000 + b(11) * 0x1000000 : 0);
  const declares = `the header declares ${dataOffset} bytes`;
  if (dataOffset > HEADER_BYTES_MAX) fail(`${declares}, over the limit of ${HEADER_BYTES_MAX}`);
  if (dataOffset > bytes.length) fail(`truncated: ${declares} but the payload has ${bytes.length}`);
  return { major, dictStart, dataOffset };
}

/** Decodes a `.npy` payload; the module's comment says what it accepts. */
export function decodeNpy(bytes: Uint8Array): NdArray {
  if (typedName(bytes) !== "Uint8Array") fail("a .npy payload is a Uint8Array");
  const { major, dictStart, dataOffset } = preamble(bytes);
  const raw = copyOf(bytes, dictStart, dataOffset); // a copy, as TextDecoder refuses shared memory
  if (raw[raw.length - 1] !== 0x0a) fail("the header does not end with a newline");
  const nonAscii = major === 3 ? -1 : raw.findIndex((byte) => byte >= 0x80);
  if (nonAscii >= 0) fail(`a version ${major}.0 header is ASCII; byte ${dictStart + nonAscii} is not`);
  let text: string;
  try {
    // ignoreBOM: a BOM is not NumPy's and must reach the parser to be refused, not be dropped.
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    fail("a version 3.0 header is UTF-8; this one is not");
  }
  const dict = parseLiteral(text);
  if (dict.t !== "dict") fail("the header is not a dict");
  const found = new Map<string, Py>();
  for (const [key, value] of dict.entries) {
    const name = key.t === "str" ? key.v : "";
    if (!["descr", "fortran_order", "shape"].includes(name)) {
      fail(`unknown key ${clip(text.slice(key.at, key.end))} in the header dict`);
    }
    if (found.has(name)) fail(`the header dict has '${name}' twice`);
    found.set(name, value);
  }
  const get = (key: string) => found.get(key) ?? fail(`the header dict has no '${key}'`);
  const [descr, order, dims] = [get("descr"), get("fortran_order"), get("shape")];
  const shown = (v: Py) => clip(text.slice(v.at, v.end));
  if (order.t !== "bool") fail(`'fortran_order' is ${shown(order)}, not a bool`);
  const shape = dims.t === "tuple" ? dims.items.map((d) => (d.t === "int" && d.v >= 0 ? d.v : -1)) : [-1];
  if (shape.includes(-1)) fail(`'shape' is ${shown(dims)}, not a tuple of non-negative integers`);
  const { size: itemsize, object } = dtypeSize(descr, text);
  const pickles = "which .npy stores as pickles; only plain data can be shared";
  if (object) fail(`dtype ${shown(descr)} holds Python objects, ${pickles}`);
  const tooMany = () => `shape ${pyShape(shape)} has more elements than fit in memory`;
  const elements = shape.reduce((n, d) => multiply(n, d, tooMany), 1);
  const dataBytes = multiply(elements, itemsize, () => `shape ${pyShape(shape)} × ${itemsize} bytes overflows memory`);
  const follow = bytes.length - dataOffset;
  if (follow !== dataBytes) {
    const per = `shape ${pyShape(shape)} × ${itemsize} bytes per element`;
    fail(`the header says ${dataBytes} data bytes (${per}) but ${follow} follow it`);
  }
  // As Rust's `plain_descr`: a quoted type string loses its quotes unless it needs them.
  const literal = text.slice(descr.at, descr.end);
  const dtype = descr.t === "str" && !/['"\\]/.test(literal.slice(1, -1)) ? literal.slice(1, -1) : literal;
  const ctor = typedFor(dtype);
  let data: NpyData = bytes.subarray(dataOffset);
  if (ctor !== undefined) {
    const start = bytes.byteOffset + dataOffset;
    data = start % ctor.BYTES_PER_ELEMENT === 0
      ? new ctor(bytes.buffer, start, elements)
      : new ctor(copyOf(bytes, dataOffset).buffer, 0, elements);
  }
  return { dtype, shape, fortranOrder: order.v, data, typed: ctor !== undefined };
}

/** Encodes `data` as NumPy's `np.save` does a C-order array of that `shape` (by default one dimension). */
export function encodeNpy(data: NpyData, shape?: number[]): Uint8Array {
  const name = typedName(data);
  const code = name === undefined ? undefined : CODES[name];
  if (code === undefined) {
    const holds = Object.keys(CODES).join(", ");
    fail(`the data is ${name ?? typeof data}, not one of the typed arrays .npy holds (${holds})`);
  }
  const dims = shape ?? [data.length];
  if (!Array.isArray(dims) || !dims.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail("the shape is an array of non-negative integers");
  }
  const count = dims.reduce((n, d) => n * d, 1);
  if (count !== data.length) fail(`shape ${pyShape(dims)} holds ${count} elements but the data has ${data.length}`);
  const descr = code.endsWith("1") ? `|${code}` : `${LITTLE_ENDIAN ? "<" : ">"}${code}`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${pyShape(dims)}, }`;
  // NumPy leaves room to grow the first axis in place, then pads by 1 to 64 spaces, never 0.
  if (dims.length > 0) dict += " ".repeat(Math.max(0, GROWTH_DIGITS - String(dims[0]).length));
  const unpadded = 10 + dict.length + 1;
  const total = unpadded + ALIGN - (unpadded % ALIGN);
  if (total - 10 > 0xffff) fail(`the header would take ${total} bytes, more than version 1.0 can say`);
  const out = new Uint8Array(total + data.byteLength);
  out.set([...MAGIC, 1, 0, (total - 10) & 0xff, (total - 10) >> 8]);
  out.set(new TextEncoder().encode(`${dict.padEnd(total - 11)}\n`), 10); // the dict is ASCII
  out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), total);
  return out;
}

/** The pixels of a `|u1` image of shape (H, W) (grey), (H, W, 3) (RGB) or (H, W, 4) (RGBA), in C order. */
export function toRgba(array: NdArray): Rgba {
  const { shape, data } = array;
  const [height = 0, width = 0, channels = 1] = shape;
  const drawable = typedFor(array.dtype) === Uint8Array && typedName(data) === "Uint8Array" && !array.fortranOrder
    && (shape.length === 2 || (shape.length === 3 && (channels === 3 || channels === 4)))
    && shape.every((d) => Number.isSafeInteger(d) && d >= 0);
  if (!drawable) {
    const order = array.fortranOrder ? " in Fortran order" : "";
    const what = `${clip(array.dtype)} of shape ${pyShape(shape)}${order}`;
    fail(`drawable arrays are |u1 in C order of shape (H, W), (H, W, 3) or (H, W, 4); this one is ${what}`);
  }
  // An NdArray may be made by hand: its shape is checked against its data before anything is allocated.
  const pixels = height * width;
  if (data.length !== pixels * channels) {
    fail(`the data holds ${data.length} bytes, not ${height} × ${width} × ${channels}`);
  }
  const src = data as Uint8Array;
  const rgba = new Uint8ClampedArray(pixels * 4);
  if (channels === 4) rgba.set(src);
  else {
    // Grey reads its one byte three times; RGB reads its three in turn.
    const [green, blue] = channels === 1 ? [0, 0] : [1, 2];
    for (let p = 0, s = 0, d = 0; p < pixels; p++, s += channels, d += 4) {
      rgba[d] = src[s]!;
      rgba[d + 1] = src[s + green]!;
      rgba[d + 2] = src[s + blue]!;
      rgba[d + 3] = 255;
    }
  }
  return { width, height, rgba };
}

/** Resizes `canvas` to the image of `array` and draws it (browser only). */
export function drawNpy(canvas: HTMLCanvasElement, array: NdArray): void {
  const { width, height, rgba } = toRgba(array);
  const context = canvas.getContext("2d");
  if (context === null) fail("the canvas has no 2d context (it already has another kind)");
  canvas.width = width;
  canvas.height = height;
  // ImageData refuses a zero-sized image; the resized, empty canvas already shows one.
  if (width > 0 && height > 0) context.putImageData(new ImageData(rgba, width, height), 0, 0);
}
