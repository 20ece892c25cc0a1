// The browser client on a node with an access policy (docs/SECURITY.md): connect with a user and
// password; no credentials or a wrong password is refused, and a user's rights hold per name
// prefix — as for every other client.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { connect, INFINITY, StampedeError } from "../src/index.js";
import { startNode, STAMPEDE_BIN, type TestNode } from "./node.js";

let node: TestNode;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "stampede-browser-access-"));
  const hash = (password: string) => execFileSync(STAMPEDE_BIN, ["hash-password"], { input: password }).toString().trim();
  const policy = [
    "[users.camera]",
    `password = "${hash("camera secret")}"`,
    'create = ["kiosk"]',
    'write = ["kiosk"]',
    "",
    "[users.viewer]",
    `password = "${hash("viewer secret")}"`,
    'read = ["kiosk"]',
    "",
  ].join("\n");
  writeFileSync(join(dir, "policy.toml"), policy);
  node = await startNode(["--access", join(dir, "policy.toml")]);
});

after(async () => {
  await node.stop();
  rmSync(dir, { recursive: true, force: true });
});

const refused = (e: unknown) => e instanceof StampedeError && e.kind === "PermissionDenied";

test("no credentials, or a wrong password, is refused", async () => {
  await assert.rejects(connect(node.url), refused);
  await assert.rejects(connect(node.url, { user: "viewer", password: "guess" }), refused);
  await assert.rejects(connect(node.url, { user: "nobody", password: "viewer secret" }), refused);
});

test("each user does what its rights allow, and nothing else", async () => {
  const camera = await connect(node.url, { user: "camera", password: "camera secret" });
  const viewer = await connect(node.url, { user: "viewer", password: "viewer secret" });
  try {
    const frames = await camera.createChannel("kiosk/frames");
    const base = await camera.tsMin();
    const seen = await viewer.lookup("kiosk/frames");
    const input = await (await viewer.task(INFINITY)).attachInput(seen as never);
    await (await (await camera.task(base)).attachOutput(frames)).put(base, "frame");
    await assert.rejects(camera.createChannel("elsewhere/x"), refused);
    await assert.rejects(viewer.createChannel("kiosk/mine"), refused);
    assert.equal((await input.get(base)).text(), "frame");
  } finally {
    await camera.close();
    await viewer.close();
  }
});
