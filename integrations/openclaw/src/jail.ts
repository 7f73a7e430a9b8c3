// The jail command line, driven by argv arrays only: nothing here goes through a shell, so no
// word of a path, a variable or a command is ever quoted or split by us.
import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";

export type RunResult = {
  code: number;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
};

export type RunOptions = {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  stdin?: Buffer | string;
  signal?: AbortSignal;
  /** Kill the process (SIGTERM, SIGKILL 2 s later) after so long. */
  timeoutMs?: number;
  /**
   * At most so many bytes of stdout and of stderr are kept. More: the process is killed and the
   * promise rejects with OutputLimitError (never a truncated answer taken for a whole one).
   */
  maxOutputBytes?: number;
};

/** What OpenClaw's own sandbox backends buffer of one command's output (SANDBOX_COMMAND_MAX_BUFFER_BYTES). */
export const MAX_COMMAND_OUTPUT_BYTES = 100 * 1024 * 1024;
/** What a jail control call (session list, status, notice, start, stop) may print. */
export const MAX_CONTROL_OUTPUT_BYTES = 16 * 1024 * 1024;

/** A process printed more than its bound: killed, its output not taken. */
export class OutputLimitError extends Error {
  constructor(readonly argv0: string, readonly limit: number) {
    super(`${path.basename(argv0)} printed more than ${limit} bytes on one stream: killed, its output not taken`);
    this.name = "OutputLimitError";
  }
}

/** An error that must reach OpenClaw: the tool call is refused, never run without jail. */
export class JailUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(`jail sandbox: ${message}; the command was not run`, options);
    this.name = "JailUnavailableError";
  }
}

/**
 * The jail binary: an absolute path, or a name looked up on PATH here, once, so that what runs
 * is what was checked. Missing or not executable: an error, never a fallback.
 */
export function resolveJailBinary(configured: string | undefined, envPath = process.env.PATH ?? ""): string {
  const name = configured?.trim() || "jail";
  const candidates = name.includes("/")
    ? [path.resolve(name)]
    : envPath
        .split(":")
        .filter((d) => d && path.isAbsolute(d))
        .map((d) => path.join(d, name));
  for (const c of candidates) {
    try {
      if (!statSync(c).isFile()) continue;
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // the next one
    }
  }
  throw new JailUnavailableError(
    name.includes("/")
      ? `the jail binary ${name} is missing or not executable`
      : `no executable '${name}' on PATH (set plugins.entries.jail.config.binary)`,
  );
}

/** Runs argv to its end and buffers what it prints. Rejects only when it cannot start. */
export function run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const [file, ...args] = argv;
    if (!file) {
      reject(new Error("empty argv"));
      return;
    }
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      signal: options.signal,
      killSignal: "SIGTERM",
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const limit = options.maxOutputBytes ?? MAX_COMMAND_OUTPUT_BYTES;
    let outBytes = 0;
    let errBytes = 0;
    let settled = false;
    let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let timer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (settled || !exited) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      const { code, signal } = exited;
      resolve({
        code: code ?? (signal ? 128 + signalNumber(signal) : 1),
        signal,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
      });
    };
    const overflow = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      out.length = 0;
      err.length = 0;
      child.kill("SIGKILL");
      child.stdout?.destroy();
      child.stderr?.destroy();
      reject(new OutputLimitError(file, limit));
    };
    child.stdout?.on("data", (d: Buffer) => {
      outBytes += d.length;
      if (outBytes > limit) overflow();
      else if (!settled) out.push(d);
    });
    child.stderr?.on("data", (d: Buffer) => {
      errBytes += d.length;
      if (errBytes > limit) overflow();
      else if (!settled) err.push(d);
    });
    child.on("error", (e) => {
      if (settled) return;
      if (exited === null && child.pid === undefined) {
        settled = true;
        clearTimeout(timer);
        reject(e);
      }
    });
    child.on("exit", (code, signal) => {
      exited = { code, signal };
      // A process that left a daemon holding our pipes (session start) must not hang us: the
      // pipes get a moment to drain, then the answer is what was read.
      setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish();
      }, 250).unref();
    });
    child.on("close", () => finish());
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        child.kill("SIGTERM");
        killTimer = setTimeout(() => child.kill("SIGKILL"), 2000);
      }, options.timeoutMs);
    }
    if (options.stdin !== undefined && child.stdin) {
      child.stdin.on("error", () => {
        // a command that does not read its input: EPIPE is not our failure
      });
      child.stdin.end(options.stdin);
    }
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = {
    SIGHUP: 1,
    SIGINT: 2,
    SIGQUIT: 3,
    SIGKILL: 9,
    SIGTERM: 15,
  };
  return table[signal] ?? 0;
}

export type SessionInfo = {
  name: string;
  pid: number;
  level: string;
  profile?: string;
  cwd?: string;
  started?: number;
  execs?: number;
  running?: number;
  /** Each exec in a Landlock domain of its own (jail 0.1 with per-exec domains): false or absent, what one prints another could have written. */
  execs_isolated?: boolean;
};

/** One `jail exec` of a session, as the run report lists it (words: a string when UTF-8). */
export type ReportExec = {
  id: number;
  command: Array<string | number[]>;
  cwd: string | number[] | null;
  started_ms: number;
  ended_ms: number | null;
  exit_code: number | null;
  alone: boolean;
  wrote: Array<string | number[]>;
  wrote_over_limit: number;
};

/** What `jail session stop NAME --json` prints: how the session ended, its --cow run, its report. */
export type StopOutcome = {
  status: string;
  exit_code: number;
  level: string;
  gaps: string[];
  /** The run whose --cow layers wait for review (`jail diff ID`, `jail apply ID`); null: nothing changed. */
  cow_run: string | null;
  report?: {
    changes?: { available?: boolean; roots?: string[]; created?: number; modified?: number; deleted?: number; mode_changed?: number };
    execs?: { total: number; items: ReportExec[] };
  } | null;
};

/** What `jail status --json` says from inside, reduced to what the orchestrator is told. */
export type StatusVerdict = {
  exitCode: number;
  verdict: string;
  level: string;
  layers: string;
  /** The paths the policy inside calls writable. */
  writable: string[];
  text: string;
};

/** The layers `jail status --json` names in `policy.layers`. */
const LAYERS = ["mount", "landlock", "seccomp"] as const;

export class JailCli {
  constructor(
    readonly binary: string,
    /** The environment every jail client runs with: it decides where sessions live. */
    readonly env: NodeJS.ProcessEnv,
  ) {}

  async list(): Promise<SessionInfo[]> {
    const r = await run([this.binary, "session", "list", "--json"], { env: this.env, timeoutMs: 30_000, maxOutputBytes: MAX_CONTROL_OUTPUT_BYTES });
    if (r.code !== 0) throw new JailUnavailableError(`jail session list failed (${r.code}): ${text(r.stderr)}`);
    const parsed = JSON.parse(r.stdout.toString("utf8")) as { sessions?: SessionInfo[] };
    return parsed.sessions ?? [];
  }

  async find(name: string): Promise<SessionInfo | undefined> {
    return (await this.list()).find((s) => s.name === name);
  }

  /** `jail session start --name NAME FLAGS...`: returns when the sandbox is ready. */
  async start(name: string, flags: string[], cwd: string): Promise<RunResult> {
    return run([this.binary, "session", "start", "--name", name, ...flags], {
      env: this.env,
      cwd,
      timeoutMs: 120_000,
      maxOutputBytes: MAX_CONTROL_OUTPUT_BYTES,
    });
  }

  /**
   * `jail session stop NAME --json`. The supervisor acknowledges a stop before the client reads
   * the outcome, so an outcome on stdout is this stop's; a refusal or an unknown name is an error
   * (exit 125, nothing on stdout), never a stale outcome.
   */
  async stop(name: string): Promise<{ result: RunResult; outcome?: StopOutcome }> {
    const result = await run([this.binary, "session", "stop", name, "--json"], { env: this.env, timeoutMs: 60_000, maxOutputBytes: MAX_CONTROL_OUTPUT_BYTES });
    let outcome: StopOutcome | undefined;
    try {
      const parsed = JSON.parse(result.stdout.toString("utf8")) as Partial<StopOutcome>;
      if (typeof parsed.status === "string" && typeof parsed.exit_code === "number") outcome = parsed as StopOutcome;
    } catch {
      // no outcome: the stop did not happen
    }
    return { result, outcome };
  }

  /** argv of `jail exec NAME [--cwd DIR] [--env ...] -- CMD...`. */
  execArgv(name: string, command: string[], opts: { cwd?: string; env?: string[] } = {}): string[] {
    return [
      this.binary,
      "exec",
      name,
      ...(opts.cwd ? ["--cwd", opts.cwd] : []),
      ...(opts.env ?? []).flatMap((e) => ["--env", e]),
      "--",
      ...command,
    ];
  }

  async exec(
    name: string,
    command: string[],
    opts: { cwd?: string; stdin?: Buffer | string; signal?: AbortSignal; timeoutMs?: number; maxOutputBytes?: number } = {},
  ): Promise<RunResult> {
    return run(this.execArgv(name, command, { cwd: opts.cwd }), {
      env: this.env,
      stdin: opts.stdin,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
      maxOutputBytes: opts.maxOutputBytes,
    });
  }

  /** `jail status --json` run inside the session: the proof an orchestrator asks for. */
  async status(name: string): Promise<StatusVerdict> {
    let r: RunResult;
    try {
      r = await this.exec(name, [this.binary, "status", "--json"], { timeoutMs: 60_000, maxOutputBytes: MAX_CONTROL_OUTPUT_BYTES });
    } catch (e) {
      if (!(e instanceof OutputLimitError)) throw e;
      // Flooded (by a process the session kept): no exit code to take, so no proof.
      return { exitCode: -1, verdict: "unknown", level: "unknown", layers: "", writable: [], text: e.message };
    }
    let verdict = "unknown";
    let level = "unknown";
    let layers = "";
    let writable: string[] = [];
    try {
      const s = JSON.parse(r.stdout.toString("utf8")) as {
        verdict?: string;
        policy?: { level?: string; layers?: Record<string, boolean>; writable?: unknown };
        checks?: Array<{ name: string; finding: string }>;
      };
      verdict = word(s.verdict) ?? "unrecognised";
      if (Array.isArray(s.policy?.writable)) writable = s.policy.writable.filter((w): w is string => typeof w === "string");
      level = word(s.policy?.level) ?? "unrecognised";
      // Printed inside, so the session's word: only jail's own layer names with booleans are
      // taken (they reach `sandbox list` and the system prompt), nothing else a process wrote.
      const l = s.policy?.layers as Record<string, unknown> | undefined;
      if (l && typeof l === "object") {
        layers = LAYERS.filter((k) => typeof l[k] === "boolean")
          .map((k) => `${k} ${l[k] ? "yes" : "no"}`)
          .join(", ");
      }
    } catch {
      // the exit code speaks
    }
    return { exitCode: r.code, verdict, level, layers, writable, text: bounded(text(r.stderr)) };
  }
}

/** One of jail's words (a level, a verdict): lower-case letters, short; else none. */
function word(v: unknown): string | undefined {
  return typeof v === "string" && /^[a-z][a-z_-]{0,31}$/.test(v) ? v : undefined;
}

/** What a process printed, for an error message: control characters escaped, 2,000 characters at most. */
export function bounded(t: string, max = 2000): string {
  const one = t.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\x{${c.charCodeAt(0).toString(16)}}`);
  return one.length > max ? `${one.slice(0, max)}… (${one.length - max} more characters)` : one;
}

export function text(b: Buffer): string {
  return b.toString("utf8").trim();
}
