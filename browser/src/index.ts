/**
 * Stampede's browser client (docs/BROWSER.md): channels and queues of a Stampede node, read by
 * timestamp, correlated by timestamp and garbage-collected by timestamp, from a web page — over
 * the node's WebSocket endpoint, with the operations, rules and errors of every other client.
 *
 * ```ts
 * import { connect, INFINITY } from "stampede-client";
 * const rt = await connect("ws://127.0.0.1:8765");
 * const frames = await rt.lookup("camera/frames");
 * const viewer = await rt.task(INFINITY);
 * const input = await viewer.attachInput(frames);
 * const item = await input.get("newest_unseen", { timeoutMs: 1000 });
 * drawNpy(canvas, item.array());
 * ```
 */

export {
  Channel,
  ChannelInput,
  ChannelOutput,
  connect,
  INFINITY,
  Item,
  Queue,
  QueueInput,
  QueueOutput,
  Runtime,
  Task,
  type CallOptions,
  type ConnectOptions,
  type Signal,
  type Data,
  type Selector,
  type Stats,
  type Timestamp,
} from "./client.js";
export { ERROR_KINDS, StampedeError, type ErrorKind } from "./errors.js";
export { decodeNpy, drawNpy, encodeNpy, toRgba, type NdArray, type NpyData, type Rgba } from "./npy.js";
