// The jail backend driven through OpenClaw's own code path: `openclaw agent --local` loads this
// plugin with its plugin loader, provisions the sandbox through its sandbox manager and runs its
// own exec, process, read, write, edit and apply_patch tools; the model is a script served on
// 127.0.0.1, so the suite runs offline. Each exec the script issues first runs `jail status`
// (exit 0 only inside a jail whose every claim the kernel confirms) and prints its exit code.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import * as h from "./harness.mjs";
import { startScriptedModel } from "./scripted-model.mjs";

const CONFINED = 'jail status >/dev/null 2>&1; echo "confined=$?"';
const confined = (cmd) => `${CONFINED}; ${cmd}`;

let model;
let root;

before(async () => {
  root = h.fixtureRoot("suite");
  chmodSync(root, 0o755);
  h.setHome(path.join(root, "home"));
  model = await startScriptedModel();
});

after(async () => {
  // Whatever a failed test left running.
  const list = JSON.parse(h.jail(["session", "list", "--json"]).stdout || "{}");
  for (const s of list.sessions ?? []) {
    if (s.cwd?.startsWith(root)) h.jail(["session", "stop", s.name]);
  }
  await model?.close();
  h.cleanup(root);
});

/** A project: a git repository with one file. */
function project(name) {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "a.txt"), "hello\n");
  execFileSync("git", ["init", "-q", dir]);
  return dir;
}

/** One scenario: its config, its script, one agent turn. */
async function scenario({ name, steps, sandbox = {}, plugin = {}, extraEnv = {}, dir }) {
  const proj = dir ?? project(name);
  const config = path.join(root, `${name}.json`);
  h.writeConfig(config, { baseUrl: model.baseUrl, workspace: proj, workspaceRoot: path.join(root, "sandboxes"), sandbox, plugin });
  model.reset(steps);
  const run = await h.runAgent({ config, cwd: proj, sessionKey: `agent:main:${name}`, extraEnv });
  return { proj, config, run, results: model.toolResults() };
}

/** A TCP port nothing listens on, on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function sessionsUnder(dir) {
  const list = JSON.parse(h.jail(["session", "list", "--json"]).stdout || "{}");
  return (list.sessions ?? []).filter((s) => s.cwd === dir || s.cwd?.startsWith(`${dir}/`));
}

function assertConfined(result) {
  assert.match(result, /^confined=0$/m, `not confirmed inside a jail:\n${result}`);
}

function stopSessions(dir) {
  for (const s of sessionsUnder(dir)) h.jail(["session", "stop", s.name]);
}

describe("jail sandbox backend, through openclaw agent --local", { timeout: 600_000 }, () => {
  test("read-only workspace: writes fail with the kernel's error, reads work, the host is untouched", async () => {
    const { proj, run, results } = await scenario({
      name: "ro",
      sandbox: { workspaceAccess: "ro" },
      steps: [
        { tools: [{ name: "exec", args: { command: confined(`cat "$P/a.txt"; echo x >> "$P/a.txt"; echo "rc=$?"`.replaceAll("$P", "PROJ")) } }] },
        { tools: [{ name: "read", args: { path: "PROJ/a.txt" } }] },
        { tools: [{ name: "write", args: { path: "PROJ/b.txt", content: "no\n" } }] },
        { text: "done" },
      ].map((s) => JSON.parse(JSON.stringify(s).replaceAll("PROJ", path.join(root, "ro")))),
    });
    assert.equal(run.code, 0, run.stderr);
    assertConfined(results.c0t0);
    assert.match(results.c0t0, /^hello$/m);
    assert.match(results.c0t0, /Read-only file system/);
    assert.match(results.c0t0, /^rc=[12]$/m);
    assert.match(results.c1t0, /hello/);
    // OpenClaw itself takes the write tools away from a read-only sandbox.
    assert.match(results.c2t0, /Tool write not found|read-only/i);
    assert.equal(readFileSync(path.join(proj, "a.txt"), "utf8"), "hello\n");
    assert.equal(existsSync(path.join(proj, "b.txt")), false);
    stopSessions(proj);
  });

  test("installed with OpenClaw's own installer (openclaw plugins install of the packed plugin), a tool call runs confined", async () => {
    // A HOME of its own: the other tests load the plugin from plugins.load.paths instead.
    const home = path.join(root, "install-home");
    h.setHome(home);
    try {
      const tgz = path.join(root, "openclaw-jail-sandbox.tgz");
      execFileSync("tar", ["czf", tgz, "--transform", "s,^,package/,", "package.json", "openclaw.plugin.json", "README.md", "dist"], { cwd: h.PACKAGE_DIR });
      const installed = h.openclaw(["plugins", "install", "--force", "--accept-capabilities", tgz]);
      assert.equal(installed.code, 0, installed.stdout + installed.stderr);
      assert.match(installed.stdout + installed.stderr, /Installed plugin: jail/);
      const proj = project("installed");
      const config = path.join(root, "installed.json");
      const written = h.writeConfig(config, { baseUrl: model.baseUrl, workspace: proj, workspaceRoot: path.join(root, "sandboxes") });
      delete written.plugins.load;
      writeFileSync(config, JSON.stringify(written, null, 2));
      model.reset([{ tools: [{ name: "exec", args: { command: confined("echo installed") } }] }, { text: "done" }]);
      const run = await h.runAgent({ config, cwd: proj, sessionKey: "agent:main:installed" });
      assert.equal(run.code, 0, run.stderr);
      const results = model.toolResults();
      assertConfined(results.c0t0);
      assert.match(results.c0t0, /^installed$/m);
      stopSessions(proj);
    } finally {
      h.setHome(path.join(root, "home"));
    }
  });

  test("writable workspace: every tool call goes through jail exec into one confined session; protected paths stay read-only; exit codes and output come back", async () => {
    // A jail binary that writes down each of its invocations, then is jail: the audit of what the
    // plugin ran on the host.
    const log = path.join(root, "jail-calls.log");
    const wrapper = path.join(root, "jail-audited");
    writeFileSync(
      wrapper,
      `#!/bin/sh\n{ printf '%s\\037' "$@"; printf '\\036'; } >> '${log}' 2>/dev/null\nexec '${h.jailBinary()}' "$@"\n`,
    );
    chmodSync(wrapper, 0o755);
    const { proj, run, results } = await scenario({
      name: "rw",
      plugin: { binary: wrapper },
      steps: [
        { tools: [{ name: "write", args: { path: "notes.txt", content: "from the write tool\n" } }] },
        { tools: [{ name: "edit", args: { path: "notes.txt", edits: [{ oldText: "from the write tool", newText: "edited by the edit tool" }] } }] },
        { tools: [{ name: "apply_patch", args: { input: "*** Begin Patch\n*** Add File: patched.txt\n+patched line\n*** End Patch" } }] },
        { tools: [{ name: "read", args: { path: "patched.txt" } }] },
        { tools: [{ name: "exec", args: { command: confined('cat notes.txt patched.txt; echo "$GREETING"; echo to-stderr >&2; exit 3'), env: { GREETING: "value-of-a-tool-variable" } } }] },
        { tools: [{ name: "write", args: { path: ".git/hooks/pre-commit", content: "#!/bin/sh\necho pwned\n" } }] },
        { tools: [{ name: "exec", args: { command: confined('echo pwned > .git/hooks/pre-commit; echo "rc=$?"') } }] },
        { tools: [{ name: "exec", args: { command: confined("sleep 1; echo background-done"), background: true } }] },
        // The process tool: poll the background session until it ends (a second at a time).
        ...Array.from({ length: 15 }, () => async (messages) => {
          const tools = messages.filter((m) => m.role === "tool");
          const last = tools.at(-1)?.content ?? "";
          if (/exited with code/.test(last)) return { text: "done" };
          const started = tools.find((m) => /Command still running \(session /.test(m.content))?.content ?? "";
          const id = /session ([A-Za-z0-9_-]+)/.exec(started)?.[1] ?? "missing";
          await new Promise((r) => setTimeout(r, 1000));
          return { tools: [{ name: "process", args: { action: "poll", sessionId: id } }] };
        }),
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    // The sandbox's explanation reaches the agent: what jail enforces, at what level, in jail's words.
    const prompt = model.systemPrompt();
    assert.match(prompt, /runs in a jail session \(oc-[0-9a-f]{16}\), enforced by the Linux kernel at level full \(mount yes, landlock yes, seccomp yes\)/);
    assert.match(prompt, /You are working inside a sandbox \(jail/);
    // The file tools wrote the host's tree (--rw) from inside the jail.
    assert.equal(readFileSync(path.join(proj, "notes.txt"), "utf8"), "edited by the edit tool\n");
    assert.equal(readFileSync(path.join(proj, "patched.txt"), "utf8"), "patched line\n");
    assert.match(results.c3t0, /patched line/);
    // The exec tool's output, stderr and exit code, as OpenClaw gives them to the model.
    assertConfined(results.c4t0);
    assert.match(results.c4t0, /edited by the edit tool\npatched line/);
    assert.match(results.c4t0, /to-stderr/);
    assert.match(results.c4t0, /^value-of-a-tool-variable$/m, "the tool call's variable reached the command");
    assert.match(results.c4t0, /exited with code 3/);
    // .git/hooks is a protected name under --rw: the kernel refuses the write tool and the shell.
    assert.match(results.c5t0, /Read-only file system/);
    assert.match(results.c6t0, /Read-only file system/);
    assert.match(results.c6t0, /^rc=[12]$/m);
    assert.equal(existsSync(path.join(proj, ".git/hooks/pre-commit")), false);
    // A background exec (the process tool) runs confined as well.
    const polled = Object.entries(results)
      .filter(([id]) => Number(/^c(\d+)t0$/.exec(id)?.[1]) >= 8)
      .map(([, text]) => text)
      .join("\n");
    assert.match(results.c7t0, /Command still running/);
    assertConfined(polled);
    assert.match(polled, /background-done/);
    assert.match(polled, /exited with code 0/);
    // The audit: the plugin ran jail only, and every command it ran went into the one session.
    const calls = readFileSync(log, "utf8")
      .split("\x1e")
      .filter(Boolean)
      .map((r) => r.split("\x1f").slice(0, -1));
    const [session] = sessionsUnder(proj);
    assert.ok(session, "the session is up");
    assert.equal(session.level, "full");
    const execs = calls.filter((c) => c[0] === "exec");
    for (const c of calls) assert.ok(["session", "exec"].includes(c[0]) || (c[0] === "status" && c.length === 1), `unexpected jail call: ${c.join(" ")}`);
    for (const c of execs) assert.equal(c[1], session.name, `an exec outside the session: ${c.join(" ")}`);
    const fileOps = execs.filter((c) => c.includes("openclaw-sandbox-fs"));
    const shellCommands = execs.filter((c) => c.some((w) => w.includes(CONFINED)));
    assert.ok(fileOps.length >= 5, `file tools through jail exec: ${fileOps.length}`);
    assert.equal(shellCommands.length, 3, "each exec tool call is one jail exec");
    // Its value travelled in jail exec's environment, not in an argv anyone on the host can read.
    assert.ok(!calls.some((c) => c.some((w) => w.includes("value-of-a-tool-variable"))), "a variable's value in argv");
    assert.ok(execs.some((c) => c.includes("GREETING")), "passed by name");
    stopSessions(proj);
  });

  test("--cow: the session's edits stay off the host and come back as a jail run when OpenClaw stops the sandbox", async () => {
    const { proj, config, run, results } = await scenario({
      name: "cow",
      plugin: { workspaceWrites: "cow" },
      steps: [
        { tools: [{ name: "exec", args: { command: confined("echo layer > cow.txt; sed -i s/hello/changed/ a.txt; cat a.txt") } }] },
        { tools: [{ name: "write", args: { path: "written.txt", content: "by the write tool\n" } }] },
        { tools: [{ name: "read", args: { path: "a.txt" } }] },
        { text: "done" },
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assertConfined(results.c0t0);
    assert.match(results.c0t0, /^changed$/m);
    assert.match(results.c2t0, /changed/, "the file tools see the layer");
    assert.equal(readFileSync(path.join(proj, "a.txt"), "utf8"), "hello\n");
    assert.equal(existsSync(path.join(proj, "cow.txt")), false);
    assert.equal(existsSync(path.join(proj, "written.txt")), false);
    const [session] = sessionsUnder(proj);
    assert.ok(session);
    // OpenClaw's own way to end a sandbox: its registry, then the backend's manager.
    const listed = h.openclaw(["sandbox", "list", "--json"], { config });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(session.name));
    // The sandbox's explanation in OpenClaw's own listing: what jail enforces, at what level.
    assert.match(listed.stdout, /jail full \(mount yes, landlock yes, seccomp yes\)/);
    // `sandbox explain` takes one value from a backend, its working directory (resolveWorkdir).
    const explained = h.openclaw(["sandbox", "explain", "--session", "agent:main:cow", "--json"], { config });
    assert.equal(explained.code, 0, explained.stderr);
    const explanation = JSON.parse(explained.stdout.slice(explained.stdout.search(/^\{/m)));
    assert.equal(explanation.sandbox.backend, "jail");
    assert.equal(explanation.sandbox.runtimeWorkdir, proj);
    assert.equal(explanation.sandbox.sessionIsSandboxed, true);
    const recreate = h.openclaw(["sandbox", "recreate", "--all", "--force"], { config });
    assert.equal(recreate.code, 0, recreate.stdout + recreate.stderr);
    assert.equal(sessionsUnder(proj).length, 0, "the session was stopped");
    // The run comes back by its id, from `jail session stop --json`'s cow_run (no guessing in `jail runs`).
    const said = recreate.stdout + recreate.stderr;
    const id = /its copy-on-write layer waits as run ([0-9a-f]+): review: jail diff \1; apply: jail apply \1/.exec(said)?.[1];
    assert.ok(id, `no cow_run in what the plugin said:\n${said}`);
    const runs = JSON.parse(h.jail(["runs", "--json"]).stdout).filter((r) => r.roots.includes(proj));
    assert.deepEqual(runs.map((r) => r.id), [id], JSON.stringify(runs));
    const [cowRun] = runs;
    assert.equal(cowRun.state, "pending");
    assert.equal(cowRun.changed, 3);
    // The report's execs name the tool calls that changed what: the exec tool's shell command,
    // and the write tool's script (OpenClaw's fs bridge, through jail exec).
    const execLines = said.split("\n").filter((l) => /^\s*exec \d+ \(exit/.test(l));
    const execTool = execLines.find((l) => l.includes("echo layer > cow.txt"));
    assert.ok(execTool, `the exec tool call is not named:\n${said}`);
    assert.ok(execTool.includes(path.join(proj, "cow.txt")) && execTool.includes(path.join(proj, "a.txt")), execTool);
    const writeTool = execLines.find((l) => l.includes("openclaw-sandbox-fs") && l.includes(path.join(proj, "written.txt")));
    assert.ok(writeTool, `the write tool call is not named:\n${said}`);
    const diff = h.jail(["diff", cowRun.id]).stdout;
    assert.match(diff, /cow\.txt/);
    assert.match(diff, /written\.txt/);
    assert.match(diff, /\+changed/);
    const applied = h.jail(["apply", cowRun.id]);
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(readFileSync(path.join(proj, "a.txt"), "utf8"), "changed\n");
    assert.equal(readFileSync(path.join(proj, "written.txt"), "utf8"), "by the write tool\n");
  });

  test("a sub-agent spawned with sandbox: \"require\" through a gateway on loopback: accepted, its tool calls run confined in a jail session of its own", async () => {
    // sessions_spawn hands the child's run to the gateway (agent --local has no published reply
    // runtime), and the gateway takes only an installed plugin's models as verified: so the
    // plugin is installed and a gateway runs on 127.0.0.1 for this test.
    const home = path.join(root, "gateway-home");
    h.setHome(home);
    let gateway;
    try {
      const tgz = path.join(root, "openclaw-jail-sandbox-gw.tgz");
      execFileSync("tar", ["czf", tgz, "--transform", "s,^,package/,", "package.json", "openclaw.plugin.json", "README.md", "dist"], { cwd: h.PACKAGE_DIR });
      const installed = h.openclaw(["plugins", "install", "--force", "--accept-capabilities", tgz]);
      assert.equal(installed.code, 0, installed.stdout + installed.stderr);
      const proj = project("subagent");
      const config = path.join(root, "subagent.json");
      const port = await freePort();
      const token = "gateway-token-of-the-test";
      const written = h.writeConfig(config, { baseUrl: model.baseUrl, workspace: proj, workspaceRoot: path.join(root, "sandboxes") });
      delete written.plugins.load;
      written.tools = { profile: "full" };
      written.gateway = { mode: "local", port, bind: "loopback", auth: { mode: "token", token } };
      writeFileSync(config, JSON.stringify(written, null, 2));
      const TASK = "CHILD-TASK: run jail status";
      // The child's request carries the task; the parent's carry its sessions_spawn call.
      const isChild = (messages) => JSON.stringify(messages).includes(TASK) && !JSON.stringify(messages).includes("sessions_spawn");
      let childDone;
      const childFinished = new Promise((r) => (childDone = r));
      model.reset([
        (messages) =>
          isChild(messages)
            ? { tools: [{ name: "exec", args: { command: confined("echo child-ran") } }] }
            : { tools: [{ name: "tool_call", args: { id: "sessions_spawn", args: { task: TASK, sandbox: "require" } } }] },
        async (messages) => {
          if (isChild(messages)) {
            childDone(messages.filter((m) => m.role === "tool").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n"));
            return { text: "child done" };
          }
          await Promise.race([childFinished, new Promise((r) => setTimeout(r, 60_000))]);
          return { text: "parent done" };
        },
      ]);
      const env = { ...h.testEnv(), OPENCLAW_CONFIG_PATH: config, OPENCLAW_GATEWAY_TOKEN: token };
      gateway = spawn(process.execPath, [h.OPENCLAW, "gateway", "run", "--port", String(port), "--bind", "loopback", "--auth", "token", "--token", token], { env, stdio: ["ignore", "pipe", "pipe"] });
      let log = "";
      gateway.stdout.on("data", (d) => (log += d));
      gateway.stderr.on("data", (d) => (log += d));
      for (let i = 0; i < 90 && !/server listening/.test(log); i++) await new Promise((r) => setTimeout(r, 1000));
      assert.match(log, /server listening/, log);
      // Not spawnSync: the scripted model answers from this process's event loop.
      const parent = await new Promise((resolve) => {
        const c = spawn(process.execPath, [h.OPENCLAW, "agent", "--session-key", "agent:main:subagent-parent", "--message", "spawn the child", "--json", "--timeout", "120"], { env, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        c.stdout.on("data", (d) => (out += d));
        c.stderr.on("data", (d) => (out += d));
        c.on("close", (code) => resolve({ code, out }));
      });
      assert.equal(parent.code, 0, parent.out);
      // The parent's and the child's first tool calls share an id (c0t0): found by content.
      const spawned =
        model.requests
          .flatMap((r) => r.messages ?? [])
          .filter((m) => m.role === "tool")
          .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))
          .find((t) => t.includes("sessions_spawn")) ?? "";
      assert.match(spawned, /\\"status\\": \\"accepted\\"/, spawned);
      assert.match(spawned, /agent:main:subagent:[0-9a-f-]+/);
      const child = await Promise.race([childFinished, new Promise((r) => setTimeout(() => r("(no child result)"), 60_000))]);
      assertConfined(child);
      assert.match(child, /^child-ran$/m);
      // The parent's session and the child's are two jail sessions (two scope keys), both full.
      const sessions = sessionsUnder(proj);
      assert.ok(sessions.length >= 2, JSON.stringify(sessions));
      for (const s of sessions) assert.equal(s.level, "full");
      // sandbox: "require" asks OpenClaw only that the child be sandboxed (sessions_spawn refuses
      // otherwise); it does not mark the child's session sandbox: "required" (an operator role's
      // mark), so the child's session is not started with --require full: plugin config
      // require: "full" is the way to have it for every session.
      assert.match(log, /jail: session oc-[0-9a-f]{16} started: jail session start /);
      assert.doesNotMatch(log, /--require full/);
    } finally {
      // Ended before its sessions are stopped: a turn it still runs (the child's completion
      // announced to the parent) could start one after.
      if (gateway && gateway.exitCode === null && gateway.signalCode === null) {
        const ended = new Promise((r) => gateway.once("exit", r));
        gateway.kill("SIGTERM");
        await Promise.race([ended, new Promise((r) => setTimeout(r, 30_000))]);
      }
      // Its sessions live in this HOME's state directory: stopped here, pass or fail (after()
      // looks only in the suite's HOME, and removing the directory would orphan them).
      stopSessions(path.join(root, "subagent"));
      h.setHome(path.join(root, "home"));
    }
  });

  test("a timeout stops the command's whole tree inside the session", async () => {
    const started = Date.now();
    const { proj, run, results } = await scenario({
      name: "timeout",
      steps: [
        { tools: [{ name: "exec", args: { command: confined("(sleep 300; echo late) & sleep 300"), timeoutSeconds: 3 } }] },
        { tools: [{ name: "exec", args: { command: confined("ps -eo comm= | grep -c '^sleep$'; true") } }] },
        { text: "done" },
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(results.c0t0, /timed out after 3 seconds/);
    assert.doesNotMatch(results.c0t0, /late/);
    assertConfined(results.c1t0);
    assert.match(results.c1t0, /^0$/m, "no sleep left in the session");
    assert.ok(Date.now() - started < 120_000);
    stopSessions(proj);
  });

  test("a process one tool call leaves cannot write into a later tool call's output: each exec is a Landlock domain of its own", async () => {
    // It writes into every stdout and stderr it can open through /proc, for 20 seconds.
    const forger =
      "setsid sh -c 'end=$(($(date +%s)+20)); while [ $(date +%s) -lt $end ]; do for f in /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/2; do (echo FORGED >> $f) 2>/dev/null; done; done' </dev/null >/dev/null 2>&1 & echo left";
    const { proj, run, results } = await scenario({
      name: "leftover",
      steps: [
        { tools: [{ name: "exec", args: { command: confined(forger) } }] },
        { tools: [{ name: "exec", args: { command: confined("sleep 2; jail status --json | head -c 200; echo; echo after") } }] },
        { text: "done" },
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(results.c0t0, /^left$/m);
    assertConfined(results.c1t0);
    assert.match(results.c1t0, /"verdict": ?"confined"/);
    assert.match(results.c1t0, /^after$/m);
    assert.doesNotMatch(results.c1t0, /FORGED/);
    stopSessions(proj);
  });

  describe("fail closed: OpenClaw gets an error, the command never runs unconfined", () => {
    const marker = () => path.join(root, "ran-unconfined");
    const attempt = () => [
      { tools: [{ name: "exec", args: { command: `touch '${marker()}'` } }] },
      { tools: [{ name: "write", args: { path: marker(), content: "x" } }] },
      { text: "done" },
    ];

    test("no jail binary", async () => {
      const { run } = await scenario({ name: "nojail", plugin: { binary: path.join(root, "no-such-jail") }, steps: attempt() });
      assert.notEqual(run.code, 0);
      assert.match(run.stdout + run.stderr, /jail sandbox: .*no-such-jail is missing or not executable; the command was not run/);
      assert.equal(existsSync(marker()), false);
    });

    test("--require full where the full level cannot be had", { skip: !process.env.JAIL_TEST_HOOKS_BIN && process.env.JAIL_OPENCLAW_REQUIRE_ALL !== "1" && "needs JAIL_TEST_HOOKS_BIN: a jail built with --features test-hooks" }, async () => {
      assert.ok(process.env.JAIL_TEST_HOOKS_BIN, "JAIL_TEST_HOOKS_BIN is required here (JAIL_OPENCLAW_REQUIRE_ALL=1)");
      // A jail without the feature ignores JAIL_TEST_DISABLE: say so rather than fail below.
      const probe = spawnSync(process.env.JAIL_TEST_HOOKS_BIN, ["--require", "full", "--", "true"], {
        env: { ...h.testEnv(), JAIL_TEST_DISABLE: "landlock" },
        encoding: "utf8",
      });
      assert.notEqual(probe.status, 0, `${process.env.JAIL_TEST_HOOKS_BIN} was not built with --features test-hooks`);
      const { proj, run } = await scenario({
        name: "require",
        plugin: { binary: path.resolve(process.env.JAIL_TEST_HOOKS_BIN), require: "full" },
        extraEnv: { JAIL_TEST_DISABLE: "landlock" },
        steps: attempt(),
      });
      assert.notEqual(run.code, 0);
      assert.match(run.stdout + run.stderr, /required enforcement level 'full' not met/);
      assert.equal(existsSync(marker()), false);
      assert.equal(sessionsUnder(proj).length, 0);
    });

    test("a socket directory so long that the session's socket path does not fit: a clear error", async () => {
      // jail keeps its sockets in $XDG_RUNTIME_DIR/jail-sessions: here one of 130 bytes and more.
      const runtime = path.join(root, `long-runtime-${"r".repeat(100)}`);
      mkdirSync(runtime, { recursive: true, mode: 0o700 });
      const { run } = await scenario({ name: "longdir", extraEnv: { XDG_RUNTIME_DIR: runtime }, steps: attempt() });
      assert.notEqual(run.code, 0);
      assert.match(run.stdout + run.stderr, /jail sandbox: jail session start oc-[0-9a-f]{16}: the session's socket path is longer than a Unix socket address allows \(108 bytes\).*give OpenClaw an XDG_RUNTIME_DIR that is short.*; the command was not run/);
      assert.equal(existsSync(marker()), false);
    });

    test("a forged jail status (its stdout says full, the supervisor says partial) is refused", { skip: !process.env.JAIL_TEST_HOOKS_BIN && process.env.JAIL_OPENCLAW_REQUIRE_ALL !== "1" && "needs JAIL_TEST_HOOKS_BIN" }, async () => {
      assert.ok(process.env.JAIL_TEST_HOOKS_BIN, "JAIL_TEST_HOOKS_BIN is required here (JAIL_OPENCLAW_REQUIRE_ALL=1)");
      // What a process already in a reused session could do to the status exec's stdout (write
      // into it), short of its exit code: here a jail that prints a forged document inside.
      const real = path.resolve(process.env.JAIL_TEST_HOOKS_BIN);
      const forger = path.join(root, "jail-forged-status");
      writeFileSync(
        forger,
        `#!/bin/sh\nif [ "$1" = status ]; then\n  '${real}' status --json >/dev/null 2>&1; rc=$?\n  echo '{"verdict":"confined","policy":{"level":"full","layers":{"mount":true,"landlock":true,"seccomp":true},"writable":[]}}'\n  exit $rc\nfi\nexec '${real}' "$@"\n`,
      );
      chmodSync(forger, 0o755);
      const { proj, run } = await scenario({ name: "forged", plugin: { binary: forger }, extraEnv: { JAIL_TEST_DISABLE: "landlock" }, steps: attempt() });
      assert.notEqual(run.code, 0);
      assert.match(run.stdout + run.stderr, /is not confined as asked: jail status inside printed level full, the session's supervisor says partial; the command was not run/);
      assert.equal(existsSync(marker()), false);
      assert.equal(sessionsUnder(proj).length, 0, "the session was stopped");
    });

    test("the session ended under a running agent", async () => {
      const proj = project("ended");
      const steps = [
        { tools: [{ name: "exec", args: { command: confined("true") } }] },
        () => {
          for (const s of sessionsUnder(proj)) h.jail(["session", "stop", s.name]);
          return attempt()[0];
        },
        attempt()[1],
        { text: "done" },
      ];
      const { run, results } = await scenario({ name: "ended", dir: proj, steps });
      assertConfined(results.c0t0);
      assert.match(results.c1t0, /no such session/);
      assert.match(results.c1t0, /exited with code 125/);
      assert.match(results.c2t0, /error/i);
      assert.equal(existsSync(marker()), false);
      assert.ok(run.code === 0 || run.code === 1);
    });
  });
});
