/**
 * Stampede's wire (the Rust crate `stampede-wire`, whose `VERSION` this is): what a client and a
 * node say to each other, described as schemas of the `postcard` encoding. A message is
 *
 * ```text
 * [VERSION: u8][header: postcard][payload: raw bytes, to the end]
 * ```
 *
 * the header a {@link RequestHeader} (client → node) or a `Reply` (node → client); the payload is
 * a put's bytes, or the bytes of the items a reply carries, one after another.
 *
 * Every type here mirrors one of the Rust side, field for field and variant for variant, in
 * declaration order: the golden vectors (`tests/vectors/wire.json`, written by
 * `crates/stampede-wire/tests/golden.rs`) hold each one to the Rust encoding, and fail when either
 * side changes alone.
 */

import { decode, DecodeError, encode, Reader, Writer, type Schema, type Value } from "./postcard.js";

/** The wire format's version: the first byte of every message. */
export const VERSION = 28;

const handle: Schema = "u64";
const optionU64: Schema = { option: "u64" };

export const SELECTOR: Schema = {
  enum: [
    ["At", "ts"],
    ["Oldest", null],
    ["Newest", null],
    ["OldestUnseen", null],
    ["NewestUnseen", null],
  ],
};

const RETENTION: Schema = {
  enum: [
    ["History", null],
    ["CurrentReaders", null],
  ],
};

const PREFETCH: Schema = {
  enum: [
    ["off", null],
    ["newest", null],
    ["auto", null],
  ],
};

const PEER: Schema = {
  struct: [
    ["id", "u64big"],
    ["incarnation", "u64big"],
  ],
};

/** `stampede_core::Op`: every operation on a runtime. */
export const OP: Schema = {
  enum: [
    [
      "CreateChannel",
      {
        struct: [
          ["name", "string"],
          ["capacity", optionU64],
          ["bytes_max", optionU64],
          ["retention", RETENTION],
          ["codec", { option: "string" }],
          ["description", "string"],
        ],
      },
    ],
    [
      "CreateQueue",
      {
        struct: [
          ["name", "string"],
          ["capacity", optionU64],
          ["bytes_max", optionU64],
          ["description", "string"],
        ],
      },
    ],
    ["Lookup", { struct: [["name", "string"]] }],
    ["Names", { struct: [["prefix", "string"]] }],
    ["Listing", { struct: [["prefix", "string"]] }],
    ["ContainerStats", { struct: [["container", handle]] }],
    ["Destroy", { struct: [["container", handle]] }],
    ["Task", { struct: [["virtual_time", "ts"]] }],
    [
      "Spawn",
      {
        struct: [
          ["task", handle],
          ["virtual_time", "ts"],
        ],
      },
    ],
    [
      "SetVirtualTime",
      {
        struct: [
          ["task", handle],
          ["virtual_time", "ts"],
        ],
      },
    ],
    ["Times", { struct: [["task", handle]] }],
    ["CloseTask", { struct: [["task", handle]] }],
    [
      "SetTaskName",
      {
        struct: [
          ["task", handle],
          ["name", "string"],
        ],
      },
    ],
    ["Graph", null],
    [
      "AttachInput",
      {
        struct: [
          ["task", handle],
          ["container", handle],
          ["max_lag_items", optionU64],
          ["max_lag_ts", optionU64],
          ["prefetch", PREFETCH],
        ],
      },
    ],
    [
      "AttachOutput",
      {
        struct: [
          ["task", handle],
          ["container", handle],
        ],
      },
    ],
    ["Detach", { struct: [["connection", handle]] }],
    [
      "Put",
      {
        struct: [
          ["connection", handle],
          ["ts", "ts"],
          ["codec", "string"],
          ["refcount", { option: "u32" }],
          ["wait_us", "u64"],
        ],
      },
    ],
    [
      "Get",
      {
        struct: [
          ["connection", handle],
          ["selector", SELECTOR],
          ["wait_us", "u64"],
        ],
      },
    ],
    [
      "GetRange",
      {
        struct: [
          ["connection", handle],
          ["t0", "ts"],
          ["t1", "ts"],
        ],
      },
    ],
    [
      "Consume",
      {
        struct: [
          ["connection", handle],
          ["ts", "ts"],
        ],
      },
    ],
    [
      "ConsumeUntil",
      {
        struct: [
          ["connection", handle],
          ["ts", "ts"],
        ],
      },
    ],
    [
      "QueuePut",
      {
        struct: [
          ["connection", handle],
          ["ts", "ts"],
          ["codec", "string"],
          ["wait_us", "u64"],
        ],
      },
    ],
    [
      "QueueGet",
      {
        struct: [
          ["connection", handle],
          ["wait_us", "u64"],
        ],
      },
    ],
    [
      "QueueConsume",
      {
        struct: [
          ["connection", handle],
          ["seq", optionU64],
          ["ts", "ts"],
        ],
      },
    ],
    ["Timestamps", { struct: [["container", handle]] }],
    ["PutLog", { struct: [["container", handle]] }],
    ["Settledness", { struct: [["container", handle]] }],
    ["CloseProducers", { struct: [["container", handle]] }],
    ["Demand", { struct: [["connection", handle]] }],
    [
      "WaitChanged",
      {
        struct: [
          ["connection", handle],
          ["selector", { option: SELECTOR }],
          ["wait_us", "u64"],
        ],
      },
    ],
    ["WaitProgress", { struct: [["wait_us", "u64"]] }],
    ["TsMin", null],
    ["Stats", null],
    ["Collect", null],
    ["TraceClock", null],
    ["MeshTime", null],
    ["CheckInvariants", null],
    [
      "MoveTask",
      {
        struct: [
          ["task", handle],
          ["to_node", "string"],
          ["to", PEER],
        ],
      },
    ],
    [
      "TakeOverTask",
      {
        struct: [
          ["from_node", "string"],
          ["from", PEER],
          ["id", "u64big"],
          ["to", PEER],
          ["virtual_time", "ts"],
          ["proof", { bytes: 16 }],
        ],
      },
    ],
    ["OnReclaim", { struct: [["container", { option: handle }]] }],
  ],
};

/** `stampede_wire::Request`. */
export const REQUEST: Schema = {
  enum: [
    ["Hello", null],
    [
      "Open",
      {
        struct: [
          ["user", { option: "string" }],
          ["password", { option: "string" }],
        ],
      },
    ],
    ["Close", null],
    ["Pushes", null],
    ["Op", OP],
  ],
};

/** `stampede_wire::RequestHeader`: a request with its session, secret and numbers. */
export const REQUEST_HEADER: Schema = {
  struct: [
    ["session", "string"],
    ["secret", { bytes: 16 }],
    ["seq", "u64"],
    ["acks", { vec: "u64" }],
    ["floor", "u64"],
    [
      "opened",
      {
        vec: {
          struct: [
            ["connection", handle],
            ["ts", "ts"],
            ["ago_us", "u64"],
          ],
        },
      },
    ],
    [
      "consumed",
      {
        vec: {
          struct: [
            ["connection", handle],
            ["ts", "ts"],
            ["until", "bool"],
            ["number", "u64"],
          ],
        },
      },
    ],
    ["released", { vec: "u64" }],
    ["request", REQUEST],
  ],
};

const ITEM_HEADER: Schema = {
  struct: [
    ["ts", "ts"],
    ["codec", "string"],
    ["len", "u64"],
  ],
};

const CONTAINER_INFO: Schema = {
  struct: [
    ["id", handle],
    ["queue", "bool"],
    ["name", "string"],
    ["capacity", optionU64],
    ["bytes_max", optionU64],
    ["retention", RETENTION],
    ["codec", { option: "string" }],
    ["description", "string"],
  ],
};

const STATS: Schema = {
  struct: [
    ["live_items", "u64"],
    ["live_bytes", "u64"],
    ["reclaimed", "u64"],
    ["puts", "u64"],
    ["gets", "u64"],
    ["inputs", "u64"],
    ["outputs", "u64"],
    ["tombstones", "u64"],
    ["tombstone_runs", "u64"],
    ["claim", { option: "ts" }],
    ["ts_min", "ts"],
  ],
};

const BUDGET_USE: Schema = {
  struct: [
    ["node_live_bytes", "u64"],
    ["node_max_bytes", "u64"],
    ["session_live_bytes", "u64"],
    ["session_max_bytes", "u64"],
  ],
};

/** `stampede_core::Outcome<ItemHeader>`: what an operation returned. */
export const OUTCOME: Schema = {
  enum: [
    ["Done", null],
    ["Container", CONTAINER_INFO],
    ["Handle", handle],
    [
      "Times",
      {
        struct: [
          ["virtual_time", "ts"],
          ["visibility", "ts"],
        ],
      },
    ],
    ["Item", ITEM_HEADER],
    ["Items", { vec: ITEM_HEADER }],
    [
      "QueueItem",
      {
        struct: [
          ["seq", "u64"],
          ["item", ITEM_HEADER],
        ],
      },
    ],
    ["Names", { vec: "string" }],
    [
      "Listing",
      {
        vec: {
          struct: [
            ["name", "string"],
            ["queue", "bool"],
            ["node", { option: "string" }],
          ],
        },
      },
    ],
    ["Timestamp", "ts"],
    ["Timestamps", { vec: "ts" }],
    ["PutLog", { unsupported: "a put log" }],
    [
      "Settledness",
      {
        struct: [
          ["settled_below", "ts"],
          ["producers_closed", "bool"],
        ],
      },
    ],
    ["Stats", STATS],
    [
      "RuntimeStats",
      {
        struct: [
          ["ts_min", "ts"],
          ["containers", "u64"],
          ["claims", "u64"],
          ["budget", { option: BUDGET_USE }],
        ],
      },
    ],
    ["Count", "u64"],
    ["Graph", { unsupported: "a graph" }],
    ["Moved", { unsupported: "a task's move" }],
    ["TraceClock", { unsupported: "a trace clock" }],
    ["MeshTime", { unsupported: "a mesh time" }],
  ],
};

const op = (name: string): [string, Schema] => [name, "string"];
const fieldsOf = (...fields: Array<[string, Schema]>): Schema => ({ struct: fields });

/** `stampede_wire::WireError`: an operation's error, variant by variant. */
export const WIRE_ERROR: Schema = {
  enum: [
    ["BelowVisibility", fieldsOf(op("op"), op("name"), ["ts", "ts"], op("what"), ["limit", "ts"])],
    ["DuplicateTimestamp", fieldsOf(op("name"), ["ts", "ts"])],
    ["InvalidTimestamp", fieldsOf(op("op"), op("name"), ["ts", "ts"])],
    ["Full", fieldsOf(op("name"), ["ts", "ts"], op("reason"), ["can_never_fit", "bool"])],
    [
      "NotAvailable",
      fieldsOf(
        op("op"),
        op("name"),
        ["selector", SELECTOR],
        ["previous", { option: "ts" }],
        ["next", { option: "ts" }],
        ["settled", "bool"],
      ),
    ],
    ["AlreadyConsumed", fieldsOf(op("name"), ["ts", "ts"])],
    ["Reclaimed", fieldsOf(op("name"), ["ts", "ts"], op("reason"))],
    ["Closed", fieldsOf(op("name"), op("reason"))],
    ["NotFound", fieldsOf(op("name"))],
    ["AlreadyExists", fieldsOf(op("name"))],
    ["InvalidArgument", fieldsOf(op("op"), op("name"), op("reason"))],
    ["Unreachable", fieldsOf(op("op"), op("name"), op("reason"))],
    ["PermissionDenied", fieldsOf(op("op"), op("name"), op("right"), op("reason"))],
    ["Storage", fieldsOf(op("op"), op("name"), op("reason"))],
  ],
};

/** `stampede_wire::Hello`: what a node tells a client on first contact. */
export const HELLO: Schema = {
  struct: [
    ["node", "string"],
    ["zid", "string"],
    ["liveliness_timeout_ms", "u64"],
    ["payload_bytes_max", "u64"],
    ["wait_slice_ms", "u64"],
    ["mesh", { option: PEER }],
    [
      "direct",
      {
        struct: [
          ["unix", { option: "string" }],
          ["tcp", { vec: { tuple: ["u16", "u16"] } }],
        ],
      },
    ],
  ],
};

/** `stampede_wire::Reply`: a node's answer. */
export const REPLY: Schema = {
  enum: [
    ["Hello", HELLO],
    ["Opened", { bytes: 16 }],
    ["Error", WIRE_ERROR],
    ["Outcome", OUTCOME],
  ],
};

/** A request header as a value of {@link REQUEST_HEADER}. */
export interface RequestHeader {
  session: string;
  secret: number[];
  seq: number;
  acks: number[];
  floor: number;
  opened: Array<{ connection: number; ts: number; ago_us: number }>;
  consumed: Array<{ connection: number; ts: number; until: boolean; number: number }>;
  released: number[];
  request: Value;
}

/** The message of a request: its header, then `payload`. */
export function encodeRequest(header: RequestHeader, payload: Uint8Array = new Uint8Array()): Uint8Array {
  const w = new Writer();
  w.byte(VERSION);
  encode(w, REQUEST_HEADER, header as unknown as Value);
  w.raw(payload);
  return w.bytes();
}

/** A message as `schema` and the payload after it. A bad version is a {@link DecodeError}. */
export function decodeMessage(message: Uint8Array, schema: Schema): { value: Value; payload: Uint8Array } {
  const r = new Reader(message);
  const version = r.byte();
  if (version !== VERSION) {
    throw new DecodeError(`wire version ${version}, this client speaks ${VERSION}: use a client of the node's release`);
  }
  const value = decode(r, schema);
  return { value, payload: r.rest() };
}
