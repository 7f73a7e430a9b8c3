// The backend's handle driven directly with the real jail (no OpenClaw around it): what a
// sandboxed script can say must not pass for jail's own word, and a jail binary the sandbox could
// replace is refused before anything starts.
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { createJailSandboxBackend } from "../dist/backend.js";
import * as h from "./harness.mjs";

let root;
before(() => {
  root = h.fixtureRoot("backend");
  h.setHome(path.join(root, "home"));
});
after(() => {
  const list = JSON.parse(h.jail(["session", "list", "--json"]).stdout || "{}");
  for (const s of list.sessions ?? []) if (s.cwd?.startsWith(root)) h.jail(["session", "stop", s.name]);
  h.cleanup(root);
});

const cfg = { mode: "all", backend: "jail", scope: "session", workspaceAccess: "rw", docker: { network: "none" }, prune: {} };
const logger = { info() {}, warn() {} };

function project(name) {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "a.txt"), "hello\n");
  return dir;
}

function backend(binary = h.jailBinary()) {
  return createJailSandboxBackend({ pluginConfig: { binary }, logger, isRequired: () => false, env: h.testEnv() });
}

const sessionsUnder = (dir) =>
  (JSON.parse(h.jail(["session", "list", "--json"]).stdout || "{}").sessions ?? []).filter((s) => s.cwd === dir);

test("exit 125 with jail's words from a script is the script's exit, not 'not run'; 125 after the session ended is jail's", async () => {
  const proj = project("e125");
  const handle = await backend().factory({ sessionKey: "agent:main:e125", scopeKey: "agent:main:e125", workspaceDir: proj, agentWorkspaceDir: proj, cfg });
  const forged = { script: 'echo "jail: session x: no such session (jail session list)" >&2; exit 125', args: [] };
  const r = await handle.runShellCommand({ ...forged, allowFailure: true });
  assert.equal(r.code, 125);
  await assert.rejects(handle.runShellCommand(forged), (e) => {
    assert.notEqual(e.name, "JailUnavailableError");
    assert.doesNotMatch(e.message, /not run/);
    return true;
  });
  const [session] = sessionsUnder(proj);
  assert.ok(session);
  h.jail(["session", "stop", session.name]);
  await assert.rejects(handle.runShellCommand({ script: "true", args: [] }), /jail sandbox: the session oc-[0-9a-f]{16} ended: .*; the command was not run/);
});

test("a jail binary under the writable workspace is refused before a session starts", async () => {
  const proj = project("binrw");
  mkdirSync(path.join(proj, "tools"));
  const inside = path.join(proj, "tools", "jail");
  copyFileSync(h.jailBinary(), inside);
  await assert.rejects(
    backend(inside).factory({ sessionKey: "agent:main:binrw", scopeKey: "agent:main:binrw", workspaceDir: proj, agentWorkspaceDir: proj, cfg }),
    /jail sandbox: the jail binary .*\/tools\/jail lies under .*binrw, which the sandbox may write.*; the command was not run/,
  );
  assert.equal(sessionsUnder(proj).length, 0);
});
