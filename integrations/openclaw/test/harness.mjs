// What every test needs: fixtures under /var/tmp, an OpenClaw config that loads this plugin from
// its directory and selects the `jail` sandbox backend, and one headless agent turn through the
// real `openclaw agent exec` (its plugin loader, sandbox manager and tools), against the scripted
// model.
import { spawn, spawnSync } from "node:child_process";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const OPENCLAW = path.join(PACKAGE_DIR, "node_modules", "openclaw", "openclaw.mjs");

/** The jail binary under test: $JAIL_BIN, else `jail` on PATH. */
export function jailBinary() {
  const explicit = process.env.JAIL_BIN;
  if (explicit) return path.resolve(explicit);
  for (const dir of (process.env.PATH ?? "").split(":")) {
    const p = path.join(dir, "jail");
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {}
  }
  throw new Error("no jail binary: set JAIL_BIN or put jail on PATH");
}

/** A fresh directory under /var/tmp (not /tmp: jail gives every run a private /tmp). */
export function fixtureRoot(name) {
  const base = process.env.JAIL_OPENCLAW_TEST_DIR ?? "/var/tmp/jot";
  mkdirSync(base, { recursive: true, mode: 0o755 });
  return mkdtempSync(path.join(base, `${name}-`));
}

export function jail(args, opts = {}) {
  const r = spawnSync(jailBinary(), args, { encoding: "utf8", env: testEnv(opts.home), ...opts });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

let homeDir;
/** The environment OpenClaw and every jail client of the tests run with. */
export function testEnv(home = homeDir) {
  const env = {
    PATH: `${path.dirname(jailBinary())}:${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    LANG: "C.UTF-8",
    // No stray credentials or telemetry: the model is the scripted one.
    OPENCLAW_DISABLE_UPDATE_CHECK: "1",
    NO_COLOR: "1",
  };
  if (process.env.XDG_RUNTIME_DIR) env.XDG_RUNTIME_DIR = process.env.XDG_RUNTIME_DIR;
  return env;
}

export function setHome(home) {
  homeDir = home;
  mkdirSync(home, { recursive: true });
}

/**
 * Writes the OpenClaw config of one scenario: the scripted model as the only provider, the
 * plugin loaded from this package, sandboxing on for every session with the jail backend.
 */
export function writeConfig(file, { baseUrl, sandbox = {}, plugin = {}, workspaceRoot, workspace }) {
  const config = {
    models: {
      mode: "replace",
      providers: {
        scripted: {
          baseUrl,
          apiKey: "not-a-secret",
          api: "openai-completions",
          models: [
            {
              id: "scripted",
              name: "Scripted",
              reasoning: false,
              input: ["text"],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 128000,
              maxTokens: 4096,
            },
          ],
        },
      },
    },
    agents: {
      defaults: {
        model: { primary: "scripted/scripted" },
        workspace,
        skipBootstrap: true,
        sandbox: {
          mode: "all",
          backend: "jail",
          scope: "session",
          workspaceAccess: "rw",
          workspaceRoot,
          prune: { idleHours: 1, maxAgeDays: 1 },
          ...sandbox,
        },
      },
    },
    tools: { profile: "coding" },
    plugins: {
      enabled: true,
      allow: ["jail"],
      load: { paths: [PACKAGE_DIR] },
      // The hook that puts the sandbox's explanation in the system prompt needs this opt-in.
      entries: { jail: { enabled: true, hooks: { allowConversationAccess: true }, config: { binary: jailBinary(), ...plugin } } },
    },
  };
  writeFileSync(file, JSON.stringify(config, null, 2));
  return config;
}

/**
 * One agent turn through the embedded runner: `openclaw agent --local --session-key KEY
 * --message MESSAGE --json`, with OPENCLAW_CONFIG_PATH naming the scenario's config. (`agent exec`
 * does not load plugins from plugins.load.paths in 2026.9.6; `agent --local` loads them all.)
 */
export function runAgent({ config, sessionKey, message = "do the scripted task", timeoutSec = 120, extraEnv = {}, cwd }) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(
      process.execPath,
      [OPENCLAW, "agent", "--local", "--session-key", sessionKey, "--message", message, "--json", "--timeout", String(timeoutSec)],
      { cwd, env: { ...testEnv(), OPENCLAW_CONFIG_PATH: config, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => {
      let json;
      try {
        json = JSON.parse(stdout);
      } catch {}
      resolve({ code, stdout, stderr, json, ms: Date.now() - started });
    });
  });
}

/** A plain openclaw CLI command with the tests' environment. */
export function openclaw(args, opts = {}) {
  const env = { ...testEnv(), ...(opts.config ? { OPENCLAW_CONFIG_PATH: opts.config } : {}), ...(opts.env ?? {}) };
  const r = spawnSync(process.execPath, [OPENCLAW, ...args], { encoding: "utf8", env, cwd: opts.cwd, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function cleanup(dir) {
  if (process.env.JAIL_OPENCLAW_KEEP) return;
  rmSync(dir, { recursive: true, force: true });
}
