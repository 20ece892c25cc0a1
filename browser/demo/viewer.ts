// The demo page (demo/viewer.html, docs/BROWSER.md): a remote viewer of the kiosk's camera. It
// reads the newest frame of `kiosk/frames`, the boxes of `kiosk/decisions` at that frame's very
// timestamp (correlation by timestamp), draws both, and lets the user mark the frame shown: a
// JSON annotation put into `kiosk/marks` at the frame's timestamp.
//
// What it holds on the node: the frame shown stays open on its input (everything before it is
// consumed), so ts_min stays at or below it and a mark can still be put there; the marker task's
// virtual time follows the frame shown. Query parameters: `ws` (the node's WebSocket endpoint),
// `user`, `password`, and the channels' names `frames`, `boxes`, `marks`.

import {
  connect,
  drawNpy,
  INFINITY,
  StampedeError,
  type Channel,
  type ChannelOutput,
  type Item,
  type Runtime,
  type Task,
} from "../src/index.js";

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
  label?: string;
  color?: string;
}

const params = new URLSearchParams(location.search);
const names = {
  frames: params.get("frames") ?? "kiosk/frames",
  boxes: params.get("boxes") ?? "kiosk/decisions",
  marks: params.get("marks") ?? "kiosk/marks",
};
const element = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const status = (text: string, failed = false): void => {
  element("status").textContent = text;
  element("status").classList.toggle("failed", failed);
};

/** The channel named `name`, once something creates it. */
async function channel(rt: Runtime, name: string): Promise<Channel> {
  for (;;) {
    try {
      return (await rt.lookup(name)) as Channel;
    } catch (e) {
      if (!(e instanceof StampedeError && e.kind === "NotFound")) throw e;
      status(`waiting for ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

function drawBoxes(boxes: Box[]): void {
  const overlay = element<HTMLCanvasElement>("overlay");
  const image = element<HTMLCanvasElement>("image");
  overlay.width = image.width;
  overlay.height = image.height;
  overlay.style.width = image.style.width || `${image.getBoundingClientRect().width}px`;
  const context = overlay.getContext("2d");
  if (context === null) return;
  context.clearRect(0, 0, overlay.width, overlay.height);
  context.lineWidth = 2;
  context.font = "10px sans-serif";
  for (const box of boxes) {
    context.strokeStyle = context.fillStyle = box.color ?? "#ff0";
    // Around the box, not on it: a box's colour is often its person's.
    context.strokeRect(box.x - 2, box.y - 2, box.w + 4, box.h + 4);
    if (box.label) context.fillText(box.label, box.x + 2, Math.max(10, box.y - 2));
  }
  element("boxes").textContent = String(boxes.length);
}

async function main(): Promise<void> {
  const url = params.get("ws") ?? `ws://${location.hostname || "127.0.0.1"}:8765`;
  const rt = await connect(url, { user: params.get("user") ?? undefined, password: params.get("password") ?? undefined });
  addEventListener("pagehide", () => void rt.close());
  const frames = await channel(rt, names.frames);
  const boxes = await channel(rt, names.boxes);
  let marks: Channel;
  try {
    marks = await rt.createChannel(names.marks, { codec: "json", description: "frames marked in the browser" });
  } catch (e) {
    if (!(e instanceof StampedeError && e.kind === "AlreadyExists")) throw e;
    marks = (await rt.lookup(names.marks)) as Channel;
  }
  const viewer = await rt.task(INFINITY);
  await viewer.setName("browser viewer");
  const frameInput = await viewer.attachInput(frames);
  const boxInput = await viewer.attachInput(boxes);
  let marker: { task: Task; out: ChannelOutput } | null = null;
  let shown: { ts: bigint; boxes: Box[] } | null = null;
  let marking: Promise<void> = Promise.resolve();

  element<HTMLButtonElement>("mark").addEventListener("click", () => {
    if (marker === null || shown === null) return;
    const { out } = marker;
    const { ts, boxes: seen } = shown;
    marking = marking.then(async () => {
      const entry = document.createElement("li");
      try {
        await out.put(ts, { ts: ts.toString(), people: seen.length, note: "marked in the browser" }, { codec: "json" });
        entry.textContent = `marked frame ${ts}`;
        entry.dataset["ts"] = ts.toString();
      } catch (e) {
        entry.textContent = e instanceof StampedeError && e.kind === "DuplicateTimestamp" ? `frame ${ts} is marked already` : String(e);
      }
      element("marks").append(entry);
    });
  });

  status("live");
  for (;;) {
    let frame: Item;
    try {
      frame = await frameInput.get("newest_unseen", { timeoutMs: 2000 });
    } catch (e) {
      if (e instanceof StampedeError && e.kind === "NotAvailable") continue;
      throw e;
    }
    drawNpy(element<HTMLCanvasElement>("image"), frame.array());
    let seen: Box[] = [];
    try {
      seen = ((await boxInput.get(frame.ts, { timeoutMs: 500 })).json() as { boxes?: Box[] }).boxes ?? [];
    } catch (e) {
      if (!(e instanceof StampedeError)) throw e;
    }
    drawBoxes(seen);
    // Everything before the frame shown is done with; the frame itself stays open for a mark.
    if (frame.ts > 0n) {
      await frameInput.consumeUntil(frame.ts - 1n);
      await boxInput.consumeUntil(frame.ts - 1n);
    }
    if (marker === null) {
      await marking;
      const task = await rt.task(frame.ts);
      await task.setName("browser marker");
      marker = { task, out: await task.attachOutput(marks) };
      element<HTMLButtonElement>("mark").disabled = false;
    } else {
      // The marker moves in the chain its marks take, and `shown` changes in the same turn: a
      // click before this marks the old frame before the marker moves past it, a click after it
      // marks the new one after the move (a move first would make the old frame's mark
      // BelowVisibility: seen once in CI).
      const task = marker.task;
      marking = marking.then(() => task.setVirtualTime(frame.ts));
    }
    shown = { ts: frame.ts, boxes: seen };
    element("frame-ts").textContent = frame.ts.toString();
    await marking;
    element("ts-min").textContent = (await rt.tsMin()).toString();
  }
}

main().catch((e: unknown) => status(`failed: ${e instanceof Error ? e.message : String(e)}`, true));
