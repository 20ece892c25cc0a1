// The Stampede dashboard page: connects to /ws, where the server sends a snapshot (JSON text)
// every refresh and a frame (binary: "STPF", ts i64, width u32, height u32, channels u8,
// 3 zero bytes, then the pixels, little-endian) whenever the image changes. Everything is drawn
// with textContent and canvas calls: names and labels from the runtime are never parsed as HTML.
"use strict";

const FRAME_HEADER_BYTES = 24;
const RECONNECT_MS = 1000;
const GRAPH_ROWS_MAX = 60; // tasks or channels drawn in the graph (the tables list them all)
const PALETTE = ["#5cd08a", "#f0b44c", "#5fb3f9", "#f06c6c", "#c98bf0", "#4fd6d0", "#f08bd0", "#d6d64f"];
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);

let snapshot = null; // the last snapshot
let frame = null; // { ts, image: ImageData }

// ---- formatting ----

function fmtTs(ts) {
  if (ts === null || ts === undefined) return "–";
  return ts === "INFINITY" ? "∞" : String(ts);
}

function fmtRate(r) {
  if (!r) return "0";
  if (r >= 100) return r.toFixed(0);
  if (r >= 10) return r.toFixed(1);
  return r.toFixed(2);
}

function fmtBytes(n) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
  return (i === 0 ? String(n) : n.toFixed(n >= 100 ? 0 : 1)) + " " + units[i];
}

function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (className) e.className = className;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function level(ratio) {
  if (ratio >= 1) return "full";
  return ratio >= 0.75 ? "high" : "";
}

function taskLabel(task) {
  return task.name ? task.name : "task " + task.id;
}

// ---- the socket ----

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(scheme + "://" + location.host + "/ws");
  ws.binaryType = "arraybuffer";
  ws.onopen = () => setLink("live", true);
  ws.onmessage = (event) => {
    if (typeof event.data === "string") {
      onSnapshot(JSON.parse(event.data));
    } else {
      onFrame(event.data);
    }
  };
  ws.onclose = (event) => {
    setLink("disconnected" + (event.reason ? " (" + event.reason + ")" : "") + ", retrying…", false);
    setTimeout(connect, RECONNECT_MS);
  };
}

function setLink(text, good) {
  const link = $("link");
  link.textContent = text;
  link.className = good ? "good" : "bad";
}

// ---- snapshot ----

function onSnapshot(s) {
  snapshot = s;
  $("node").textContent = s.node ? "node " + s.node : "embedded runtime";
  $("ts-min").textContent = fmtTs(s.ts_min);
  $("held-by").textContent = s.held_by.length ? s.held_by.join("; ") : "nothing";
  // Through a node: its byte budget's use (and this session's), against the budgets.
  const b = s.budget;
  $("budget").textContent = b
    ? `node ${fmtBytes(b.node_live_bytes)} of ${fmtBytes(b.node_max_bytes)}, ` +
      `this session ${fmtBytes(b.session_live_bytes)} of ${fmtBytes(b.session_max_bytes)}`
    : "not budgeted (embedded)";
  $("task-count").textContent = String(s.tasks.length);
  $("channel-count").textContent = String(s.channels.length) + (s.truncated ? " (truncated)" : "");
  $("clients").textContent = String(s.clients);
  const error = $("error");
  error.hidden = !s.error;
  error.textContent = s.error || "";
  renderImageState(s.image);
  renderChannels(s.channels);
  renderTasks(s.tasks);
  renderGraph(s);
  drawImage();
}

function renderImageState(image) {
  const message = $("image-message");
  const overlays = $("overlay-messages");
  overlays.replaceChildren();
  if (!image) {
    $("camera").hidden = true;
    return;
  }
  $("camera").hidden = false;
  $("image-channel").textContent = image.channel;
  $("frame-count").textContent = String(image.frames);
  message.hidden = !image.message;
  message.textContent = image.message || "";
  if (image.status !== "ok" && !image.ts) frame = null;
  for (const overlay of image.overlays) {
    if (overlay.message) overlays.append(el("li", overlay.message));
    if (overlay.dropped) overlays.append(el("li", overlay.channel + ": " + overlay.dropped + " boxes not drawn"));
  }
}

function fillBar(live, bound, fmt) {
  if (bound === null || bound === undefined) return el("span", "unbounded", "unbounded");
  const ratio = bound === 0 ? 1 : live / bound;
  const bar = el("div", null, "bar");
  const fill = el("div", null, "level " + level(ratio));
  fill.style.width = Math.min(100, ratio * 100).toFixed(1) + "%";
  bar.append(fill, el("span", fmt(live) + " / " + fmt(bound)));
  return bar;
}

function renderChannels(channels) {
  const body = $("channels").tBodies[0];
  const rows = channels.map((c) => {
    const tr = document.createElement("tr");
    tr.dataset.name = c.name;
    const fill = el("td", null, "fill");
    fill.append(fillBar(c.live_items, c.capacity, String));
    if (c.max_bytes !== null) fill.append(el("br"), fillBar(c.live_bytes, c.max_bytes, fmtBytes));
    tr.append(
      el("td", c.name, "name"),
      el("td", c.kind + (c.codec ? " · " + c.codec : ""), "kind"),
      el("td", String(c.live_items), "live-items"),
      el("td", fmtBytes(c.live_bytes), "live-bytes"),
      fill,
      el("td", fmtRate(c.puts_per_s), "rate"),
      el("td", fmtRate(c.gets_per_s), "get-rate"),
      el("td", fmtBytes(Math.round(c.bytes_per_s)) + "/s", "byte-rate"),
      el("td", String(c.puts), "puts"),
      el("td", String(c.reclaimed), "reclaimed"),
      el("td", String(c.dropped), "dropped"),
      el("td", String(c.skipped), "skipped"),
      el("td", fmtTs(c.claim), "claim"),
      el("td", c.inputs + " / " + c.outputs, "connections"),
    );
    if (c.description) tr.title = c.description;
    return tr;
  });
  body.replaceChildren(...rows);
}

function renderTasks(tasks) {
  const body = $("tasks").tBodies[0];
  const rows = tasks.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.id = String(t.id);
    if (t.dashboard) tr.className = "dashboard";
    const connections = t.connections
      .map((c) => (c.kind === "input" ? "← " : "→ ") + c.container + " (" + c.items + ", " + fmtRate(c.items_per_s) + "/s" +
        (c.kind === "input" ? ", skipped " + c.skipped : "") + (c.pattern ? ", reads " + c.pattern : "") + (c.prefetch ? ", " + c.prefetch : "") + ")")
      .join("  ");
    tr.append(
      el("td", String(t.id), "id"),
      el("td", taskLabel(t) + (t.dashboard ? " (this page)" : ""), "name"),
      el("td", fmtTs(t.virtual_time), "virtual-time"),
      el("td", fmtTs(t.visibility), "visibility"),
      el("td", fmtRate(t.fps), "fps"),
      el("td", connections, "connections"),
    );
    return tr;
  });
  body.replaceChildren(...rows);
}

// ---- graph: tasks on the left, channels on the right, an edge per connection ----

function renderGraph(s) {
  const graph = $("graph");
  const tasks = s.tasks.slice(0, GRAPH_ROWS_MAX);
  const channels = s.channels.slice(0, GRAPH_ROWS_MAX);
  const rowH = 52, boxH = 42, boxW = 190, width = 640, left = 8, right = width - boxW - 8;
  const height = Math.max(tasks.length, channels.length, 1) * rowH + 8;
  graph.setAttribute("viewBox", "0 0 " + width + " " + height);
  graph.style.height = height + "px";
  const children = [];
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8b929e" }));
  defs.append(marker);
  children.push(defs);

  const channelY = new Map();
  channels.forEach((c, i) => channelY.set(c.name, 8 + i * rowH + boxH / 2));
  tasks.forEach((t, i) => {
    const y = 8 + i * rowH + boxH / 2;
    t.connections.forEach((c, k) => {
      const cy = channelY.get(c.container);
      if (cy === undefined) return;
      const x1 = left + boxW, x2 = right, mx = (x1 + x2) / 2;
      const path = "M " + x1 + " " + y + " C " + mx + " " + y + ", " + mx + " " + cy + ", " + x2 + " " + cy;
      const attrs = { d: path, class: "edge " + c.kind };
      if (c.kind === "output") attrs["marker-end"] = "url(#arrow)";
      else attrs["marker-start"] = "url(#arrow)";
      children.push(svg("path", attrs));
      const label = fmtRate(c.items_per_s) + "/s" + (c.skipped ? " · skip " + c.skipped : "");
      children.push(svg("text", { x: mx, y: (y + cy) / 2 - 3 + k * 10, "text-anchor": "middle", class: "edge-label" }, label));
    });
  });
  tasks.forEach((t, i) => {
    const g = svg("g", { class: "node task" + (t.dashboard ? " dashboard" : ""), transform: "translate(" + left + "," + (8 + i * rowH) + ")" });
    g.append(
      svg("rect", { width: boxW, height: boxH, rx: 5 }),
      svg("text", { x: 8, y: 16 }, taskLabel(t)),
      svg("text", { x: 8, y: 33, class: "detail" }, "vt " + fmtTs(t.virtual_time) + " · vis " + fmtTs(t.visibility) + " · " + fmtRate(t.fps) + " fps"),
    );
    children.push(g);
  });
  channels.forEach((c, i) => {
    const g = svg("g", { class: "node channel", transform: "translate(" + right + "," + (8 + i * rowH) + ")" });
    g.append(
      svg("rect", { width: boxW, height: boxH, rx: 5 }),
      svg("text", { x: 8, y: 16 }, c.name),
      svg("text", { x: 8, y: 33, class: "detail" }, c.live_items + " items · " + fmtBytes(c.live_bytes) + " · " + fmtRate(c.puts_per_s) + "/s"),
    );
    if (c.fill_items !== null || c.fill_bytes !== null) {
      const ratio = Math.max(c.fill_items || 0, c.fill_bytes || 0);
      g.append(
        svg("rect", { x: 0, y: boxH - 4, width: boxW, height: 4, class: "fill-back" }),
        svg("rect", { x: 0, y: boxH - 4, width: Math.min(1, ratio) * boxW, height: 4, class: "fill-front " + level(ratio) }),
      );
    }
    children.push(g);
  });
  graph.replaceChildren(...children);
}

// ---- image and overlays ----

function onFrame(buffer) {
  const message = $("image-message");
  if (buffer.byteLength < FRAME_HEADER_BYTES) return;
  const view = new DataView(buffer);
  const magic = String.fromCharCode(view.getUint8(0), view.getUint8(1), view.getUint8(2), view.getUint8(3));
  if (magic !== "STPF") {
    message.hidden = false;
    message.textContent = "unknown binary message from the server";
    return;
  }
  const ts = Number(view.getBigInt64(4, true));
  const width = view.getUint32(12, true), height = view.getUint32(16, true), channels = view.getUint8(20);
  const pixels = new Uint8Array(buffer, FRAME_HEADER_BYTES);
  if (pixels.length !== width * height * channels || ![1, 3, 4].includes(channels)) {
    message.hidden = false;
    message.textContent = "a frame of " + width + "×" + height + "×" + channels + " arrived with " + pixels.length + " bytes";
    return;
  }
  const rgba = new Uint8ClampedArray(width * height * 4);
  for (let i = 0, j = 0; i < width * height; i += 1, j += channels) {
    const o = i * 4;
    if (channels === 1) {
      rgba[o] = rgba[o + 1] = rgba[o + 2] = pixels[j];
      rgba[o + 3] = 255;
    } else {
      rgba[o] = pixels[j]; rgba[o + 1] = pixels[j + 1]; rgba[o + 2] = pixels[j + 2];
      rgba[o + 3] = channels === 4 ? pixels[j + 3] : 255;
    }
  }
  frame = { ts, image: new ImageData(rgba, width, height) };
  $("frame-ts").textContent = String(ts);
  $("frame-size").textContent = width + "×" + height + (channels === 1 ? " grey" : channels === 3 ? " RGB" : " RGBA");
  drawImage();
}

function drawImage() {
  const canvas = $("image");
  const ctx = canvas.getContext("2d");
  if (!frame) {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    return;
  }
  if (canvas.width !== frame.image.width || canvas.height !== frame.image.height) {
    canvas.width = frame.image.width;
    canvas.height = frame.image.height;
  }
  ctx.putImageData(frame.image, 0, 0);
  const image = snapshot && snapshot.image;
  if (!image || image.ts !== frame.ts) return; // the snapshot describes a frame not yet arrived
  const lineWidth = Math.max(1, Math.round(canvas.width / 320));
  ctx.font = (10 + lineWidth * 2) + "px system-ui, sans-serif";
  ctx.textBaseline = "bottom";
  image.overlays.forEach((overlay, index) => {
    for (const b of overlay.boxes) {
      const color = b.color || PALETTE[index % PALETTE.length];
      ctx.strokeStyle = color;
      ctx.lineWidth = lineWidth;
      ctx.setLineDash(overlay.exact ? [] : [4 * lineWidth, 3 * lineWidth]); // dashed: an older item's boxes
      ctx.strokeRect(b.x, b.y, b.w, b.h);
      if (b.label) {
        const w = ctx.measureText(b.label).width + 6, h = 12 + lineWidth * 2;
        const y = b.y >= h ? b.y : b.y + h;
        ctx.fillStyle = color;
        ctx.fillRect(b.x, y - h, w, h);
        ctx.fillStyle = "#000";
        ctx.fillText(b.label, b.x + 3, y - 1);
      }
    }
  });
  ctx.setLineDash([]);
}

connect();
