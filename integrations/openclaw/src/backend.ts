// OpenClaw's sandbox backend interface, implemented with jail sessions.
//
// OpenClaw (dist/context-*.mjs, resolveProvisionedSandboxContext) calls the factory once per agent
// run with the scope key, the workspace directories and the resolved `agents.*.sandbox` block; the
// handle it gets back serves the exec tool (buildExecSpec: an argv OpenClaw spawns and supervises,
// timeouts and kills included), the file tools (createFsBridge; every read and write runs as a
// shell script through runShellCommand) and process cleanup (runShellCommand again). The manager
// answers `openclaw sandbox list/recreate` and pruning.
//
// Here every one of those is `jail exec SESSION -- ...`, and the session is one jail per scope key:
// the kernel, not this code, decides what each tool call may touch.
import { createHash } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import path from "node:path";
import { createRemoteShellSandboxFsBridge } from "openclaw/plugin-sdk/sandbox";
import type {
  SandboxBackendCommandParams,
  SandboxBackendCommandResult,
  SandboxBackendFactoryParams,
  SandboxBackendHandle,
  SandboxBackendManager,
  SandboxBackendRegistration,
  SandboxContext,
} from "openclaw/plugin-sdk/sandbox";
import { bounded, JailCli, JailUnavailableError, MAX_COMMAND_OUTPUT_BYTES, resolveJailBinary, text, type StatusVerdict, type StopOutcome } from "./jail.js";

export const BACKEND_ID = "jail";
/** $0 of the shell scripts of OpenClaw's file tools (read, write, edit, apply_patch). */
const FS_SCRIPT_NAME = "openclaw-sandbox-fs";

export type JailPluginConfig = {
  /** The jail binary: an absolute path or a name on PATH (default `jail`). */
  binary?: string;
  /** `direct` (default): workspaceAccess "rw" is `--rw`. `cow`: it is `--cow`, edits wait for `jail apply`. */
  workspaceWrites?: "direct" | "cow";
  /** `full`: every session is started with `--require full`, not only the ones OpenClaw requires. */
  require?: "full";
  /** A jail profile for every session (`--profile`). */
  profile?: string;
  /** More `jail session start` flags, as words (e.g. ["--net", "allow=api.example.com"]). */
  extraArgs?: string[];
};

export type Logger = { info(m: string): void; warn(m: string): void };

/**
 * Variables that must not reach the jail client's own environment (it runs on the host, outside
 * any jail): the ones it reads itself (where sessions live), and the ones the dynamic loader and
 * libc act on (glibc's list for setuid programs). A tool call's variable of such a name is passed
 * to the command in argv (`--env NAME=VALUE`), never to the client.
 */
const CLIENT_VARIABLES = new Set([
  "HOME",
  "PATH",
  "TMPDIR",
  "SHELL",
  "USER",
  "LOGNAME",
  "container",
  "GCONV_PATH",
  "GETCONF_DIR",
  "HOSTALIASES",
  "LOCALDOMAIN",
  "LOCPATH",
  "NIS_PATH",
  "NLSPATH",
  "RESOLV_HOST_CONF",
  "RES_OPTIONS",
  "TZ",
  "TZDIR",
  "LANG",
  "LANGUAGE",
  "GNUPGHOME",
  "DISPLAY",
  "WAYLAND_DISPLAY",
  "XAUTHORITY",
  "SCREENDIR",
  "STY",
  "TMUX",
  "POSIXLY_CORRECT",
]);
const CLIENT_PREFIXES = ["LD_", "GLIBC_", "MALLOC_", "RUST_", "XDG_", "LC_", "JAIL", "_"];

/** Whether a variable of this name could steer the jail client itself (tested against jail's sources). */
export function isClientVariable(name: string): boolean {
  return CLIENT_VARIABLES.has(name) || CLIENT_PREFIXES.some((p) => name.startsWith(p));
}

/** The environment of every jail client and session supervisor: where sessions live, and no more. */
export function clientEnvironment(from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME"]) {
    if (from[k] !== undefined) env[k] = from[k];
  }
  env.PATH ??= "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // Read only by jail builds with the `test-hooks` feature (the tests' way to take a layer away).
  if (from.JAIL_TEST_DISABLE !== undefined) env.JAIL_TEST_DISABLE = from.JAIL_TEST_DISABLE;
  return env;
}

export type SessionPlan = {
  name: string;
  flags: string[];
  cwd: string;
  required: boolean;
  cowRoot?: string;
};

/** The `jail session start` flags for OpenClaw's sandbox settings. Pure: the tests read it too. */
export function planSession(
  params: Pick<SandboxBackendFactoryParams, "scopeKey" | "workspaceDir" | "agentWorkspaceDir" | "skillsWorkspaceDir" | "readOnlyResourceMounts" | "cfg">,
  plugin: JailPluginConfig,
  required: boolean,
): SessionPlan {
  const { cfg } = params;
  const workspaceDir = canonical(params.workspaceDir);
  const agentDir = canonical(params.agentWorkspaceDir);
  const flags: string[] = [];
  if (plugin.profile) flags.push("--profile", plugin.profile);
  let cowRoot: string | undefined;
  switch (cfg.workspaceAccess) {
    case "rw":
      if (plugin.workspaceWrites === "cow") {
        flags.push("--cow", workspaceDir);
        cowRoot = workspaceDir;
      } else {
        flags.push("--rw", workspaceDir);
      }
      if (agentDir !== workspaceDir) flags.push("--ro", agentDir);
      break;
    case "ro":
      flags.push("--ro", workspaceDir);
      if (agentDir !== workspaceDir) flags.push("--ro", agentDir);
      break;
    case "none":
    default:
      // The sandbox's own workspace, writable; the agent's workspace is not shown at all.
      flags.push("--rw", workspaceDir);
      if (agentDir !== workspaceDir && !isInside(workspaceDir, agentDir)) flags.push("--hide", agentDir);
      break;
  }
  // The skills OpenClaw mounts read-only inside a writable workspace (workspace-mounts.ts).
  if (cfg.workspaceAccess !== "ro" && !cowRoot) {
    const root = cfg.workspaceAccess === "none" ? workspaceDir : agentDir;
    for (const p of [path.join(root, "skills"), path.join(root, ".agents", "skills")]) {
      if (existsSync(p)) flags.push("--ro", p);
    }
  }
  if (params.skillsWorkspaceDir && existsSync(params.skillsWorkspaceDir)) {
    const skills = canonical(params.skillsWorkspaceDir);
    if (!isInside(workspaceDir, skills) || !cowRoot) flags.push("--ro", skills);
  }
  for (const m of params.readOnlyResourceMounts ?? []) {
    if (existsSync(m.hostPath)) flags.push("--ro", canonical(m.hostPath));
  }
  // OpenClaw's default sandbox network is "none"; jail's own default is the host's.
  if ((cfg.docker?.network ?? "none") === "none") flags.push("--net", "none");
  // The sandbox's lifetime: OpenClaw prunes after so long idle or so old; the session ends itself then.
  if (cfg.prune?.idleHours > 0) flags.push("--idle-timeout", `${cfg.prune.idleHours}h`);
  if (cfg.prune?.maxAgeDays > 0) flags.push("--timeout", `${cfg.prune.maxAgeDays * 24}h`);
  if (required || plugin.require === "full") flags.push("--require", "full");
  flags.push(...(plugin.extraArgs ?? []));
  const hash = createHash("sha256")
    .update(JSON.stringify([params.scopeKey, workspaceDir, flags]))
    .digest("hex")
    .slice(0, 16);
  // Short on purpose: the socket is DIR/NAME.sock and a Unix socket's path has 108 bytes.
  return { name: `oc-${hash}`, flags, cwd: workspaceDir, required: required || plugin.require === "full", cowRoot };
}

function canonical(p: string): string {
  const abs = path.resolve(p);
  try {
    return realpathSync(abs);
  } catch {
    return abs;
  }
}

function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * The words of `jail exec` for OpenClaw's variables, and the client environment that carries
 * their values: a value travels in the client's environment (not in argv, where `ps` shows it),
 * except for the few names the jail client reads itself. `JAIL*` names are the session's own.
 */
export function execEnvironment(vars: Record<string, string>, base: NodeJS.ProcessEnv): { args: string[]; env: NodeJS.ProcessEnv } {
  const env: NodeJS.ProcessEnv = { ...base };
  const args: string[] = [];
  for (const [k, v] of Object.entries(vars)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || k.startsWith("JAIL")) continue;
    if (isClientVariable(k) || k in base) {
      args.push(`${k}=${v}`);
    } else {
      env[k] = v;
      args.push(k);
    }
  }
  return { args, env };
}

/**
 * What the agent is told about its sandbox, by OpenClaw session key: the level and layers `jail
 * status` confirmed from inside, and `jail notice`'s two sentences (what is read-only or hidden,
 * what stays open), as jail itself words them for an agent's prompt.
 */
export const explanations: Map<string, string> = ((globalThis as Record<symbol, unknown>)[
  // OpenClaw may load the plugin's modules more than once (one registry per load mode): the
  // factory and the prompt hook must share one map, as its own backend registry does.
  Symbol.for("jail.openclaw.explanations")
] ??= new Map<string, string>()) as Map<string, string>;

/** `jail notice` as it was printed in a session this process started, by session name. */
const notices: Map<string, string> = ((globalThis as Record<symbol, unknown>)[Symbol.for("jail.openclaw.notices")] ??= new Map<
  string,
  string
>()) as Map<string, string>;

/**
 * What the agent is told of a session whose `jail notice` cannot be taken (a reused one): the
 * host's own sentence, from the session's flags alone (the profile may open more).
 */
export function hostNotice(flags: string[]): string {
  const of = (flag: string) =>
    flags.flatMap((f, i) => (f === flag && flags[i + 1] !== undefined ? [flags[i + 1]!] : f.startsWith(`${flag}=`) ? [f.slice(flag.length + 1)] : []));
  const list = (paths: string[]) => paths.map((p) => printable(p)).join(", ");
  const rw = of("--rw");
  const cow = of("--cow");
  const hide = of("--hide");
  const profile = of("--profile")[0];
  const writable = [...rw, ...cow];
  const parts = [
    `You are working inside a sandbox (jail${profile ? `, profile ${printable(profile)}` : ""}): ` +
      (writable.length ? `only ${list(writable)} and a private /tmp can be written` : "only a private /tmp can be written") +
      `${profile ? ` (and what the profile opens)` : ""}, everything else is read-only` +
      `${cow.length ? `; writes under ${list(cow)} go to a copy-on-write layer that waits for review` : ""}` +
      `${hide.length ? `; ${list(hide)} ${hide.length > 1 ? "are" : "is"} hidden` : ""}` +
      `${of("--net").includes("none") ? "; there is no network but loopback" : ""}.`,
    "When a write or a read is denied, that is a rule of this sandbox, not an obstacle, so do not try to work around it.",
  ];
  return parts.join(" ");
}

export type BackendDeps = {
  pluginConfig: JailPluginConfig;
  logger: Logger;
  /** Whether OpenClaw requires a sandbox for this session (`sandbox: "require"`). */
  isRequired: (sessionKey: string) => boolean;
  env?: NodeJS.ProcessEnv;
  /** What one file-tool command may print on a stream (default: OpenClaw's own bound, 100 MiB). */
  maxOutputBytes?: number;
};

/** A session made ready: what `jail status` proved, and whether this call started it. */
type Ready = { status: StatusVerdict; fresh: boolean };

/** One start at a time per session name, in this process. */
const starting = new Map<string, Promise<Ready>>();

/** The roots a plan makes writable on the host or in a layer: --rw and --cow, the host's /tmp with --tmp host; extraArgs too. */
export function writableRoots(flags: string[]): string[] {
  const roots: string[] = [];
  flags.forEach((f, i) => {
    const eq = /^--(rw|cow)=(.+)$/.exec(f);
    if (eq) roots.push(canonical(eq[2]!));
    else if ((f === "--rw" || f === "--cow") && flags[i + 1] !== undefined) roots.push(canonical(flags[i + 1]!));
    else if (f === "--tmp=host" || (f === "--tmp" && flags[i + 1] === "host")) roots.push(canonical("/tmp"));
  });
  return roots;
}

/**
 * The jail binary runs on the host (every jail exec's client) and inside (jail status): under a
 * root the sandbox may write, a tool call could replace it and the next call would run the
 * agent's program on the host, unconfined. Refused.
 */
export function assertBinaryOutside(binary: string, roots: string[]): void {
  const real = canonical(binary);
  for (const root of roots) {
    if (isInside(root, real) || isInside(root, binary)) {
      throw new JailUnavailableError(
        `the jail binary ${binary} lies under ${root}, which the sandbox may write: a tool call could replace it and the next call would run on the host (install jail outside the workspace)`,
      );
    }
  }
}

async function ensureSession(cli: JailCli, plan: SessionPlan, log: Logger): Promise<Ready> {
  const pending = starting.get(plan.name);
  if (pending) return pending;
  const p = (async () => {
    assertBinaryOutside(cli.binary, writableRoots(plan.flags));
    let info = await cli.find(plan.name);
    let fresh = false;
    if (!info) {
      const r = await cli.start(plan.name, plan.flags, plan.cwd);
      // Another process may have started the same name in the meantime: that one is fine.
      info = await cli.find(plan.name);
      if (r.code !== 0 && !info) {
          const said = bounded(text(r.stderr) || text(r.stdout));
          if (/SUN_LEN/.test(said)) {
            // The name is short (oc- and 16 hex digits); the directory jail keeps sockets in is not.
            throw new JailUnavailableError(
              `jail session start ${plan.name}: the session's socket path is longer than a Unix socket address allows (108 bytes) (${said}); ` +
                "give OpenClaw an XDG_RUNTIME_DIR that is short (a directory of yours, mode 0700, such as /run/user/$UID) or a shorter HOME",
            );
          }
          throw new JailUnavailableError(`jail session start ${plan.name} failed (exit ${r.code}): ${said}`);
      }
      if (r.code === 0) {
        fresh = true;
        log.info(`jail: session ${plan.name} started: jail session start ${plan.flags.join(" ")}`);
      }
      if (!info) throw new JailUnavailableError(`jail session start ${plan.name} said it started, but jail session list does not show it`);
    }
    const refuse = async (why: string) => {
      await cli.stop(plan.name).catch(() => undefined);
      throw new JailUnavailableError(`session ${plan.name} is not confined as asked: ${why}`);
    };
    // The proof, from inside: `jail status` exits 0 only where every claim of the policy holds.
    // Its exit code is the kernel's word; the level is the supervisor's (`jail session list`, on
    // the host) and what status prints must agree with it.
    const status = await cli.status(plan.name);
    const acceptable = status.exitCode === 0 || (!plan.required && status.exitCode === 2);
    if (!acceptable || (plan.required && info.level !== "full")) {
      const hidden = status.exitCode === 126 || status.exitCode === 127 ? ` (is ${cli.binary} visible inside? jail hides home directories)` : "";
      await refuse(
        `jail status exited ${status.exitCode}${hidden} (verdict ${status.verdict}, level ${info.level}${plan.required ? ", full required" : ""}) ${status.text}`,
      );
    }
    if (status.level !== info.level) {
      await refuse(`jail status inside printed level ${status.level}, the session's supervisor says ${info.level}`);
    }
    // What `jail status` prints (the writable paths below) is jail's own only where each exec
    // has a Landlock domain of its own (a process one tool call leaves cannot reach a later
    // one's stdout); the supervisor says whether it does. Not with a profile or flags that
    // allow unix sockets or user namespaces: such a session is refused rather than believed.
    if (info.execs_isolated !== true) {
      await refuse(
        "its commands share one Landlock domain (jail session list: not isolated, as with a profile that allows unix sockets or user namespaces), so a process one tool call leaves could write into what a later jail status prints",
      );
    }
    try {
      assertBinaryOutside(cli.binary, status.writable);
    } catch (e) {
      await refuse((e as Error).message);
    }
    return { status: { ...status, level: info.level }, fresh };
  })();
  starting.set(plan.name, p);
  try {
    return await p;
  } finally {
    starting.delete(plan.name);
  }
}

export function createJailSandboxBackend(deps: BackendDeps): SandboxBackendRegistration {
  const env = clientEnvironment(deps.env);
  const cli = () => new JailCli(resolveJailBinary(deps.pluginConfig.binary, env.PATH), env);

  const factory = async (params: SandboxBackendFactoryParams): Promise<SandboxBackendHandle> => {
    if ((params.cfg.docker?.binds?.length ?? 0) > 0) {
      throw new JailUnavailableError("sandbox.docker.binds are not supported by the jail backend (use plugins.entries.jail.config.extraArgs with --ro/--rw)");
    }
    const jail = cli();
    const required = deps.isRequired(params.sessionKey);
    const plan = planSession(params, deps.pluginConfig, required);
    params.assertRuntimeCurrent?.();
    const { status, fresh } = await ensureSession(jail, plan, deps.logger);
    const name = plan.name;
    // `jail notice` is jail's own wording only in a session nothing else has run in yet (one this
    // call started): in a reused one, a process an earlier tool call left could write into the
    // notice exec's stdout and so into the system prompt. There, the sentence is the host's own,
    // from the flags the session was started with.
    if (fresh) {
      const notice = await jail
        .exec(name, [jail.binary, "notice"], { timeoutMs: 30_000, maxOutputBytes: 64 * 1024 })
        .catch(() => undefined);
      const said = notice && notice.code === 0 ? noticeText(text(notice.stdout)) : "";
      if (said) notices.set(name, said);
    }
    explanations.set(
      params.sessionKey,
      [
        `Every command and file operation of your tools runs in a jail session (${name}), enforced by the Linux kernel at level ${status.level}` +
          `${status.layers ? ` (${status.layers})` : ""}; \`jail status\` exits 0 inside it.`,
        notices.get(name) ?? hostNotice(plan.flags),
      ]
        .filter(Boolean)
        .join(" "),
    );
    const workspaceDir = plan.cwd;
    const agentWorkspaceDir = canonical(params.agentWorkspaceDir);

    const runShellCommand = async (command: SandboxBackendCommandParams): Promise<SandboxBackendCommandResult> => {
      command.signal?.throwIfAborted();
      const r = await jail.exec(name, ["/bin/sh", "-c", command.script, FS_SCRIPT_NAME, ...(command.args ?? [])], {
        stdin: command.stdin ?? "",
        signal: command.signal,
        maxOutputBytes: deps.maxOutputBytes ?? MAX_COMMAND_OUTPUT_BYTES,
      });
      // Aborted: the command was killed, what it printed is not an answer (OpenClaw's own backends
      // throw the AbortError, never an exit code a caller with allowFailure could take for "absent").
      command.signal?.throwIfAborted();
      if (r.code === 125 && !(await jail.find(name).catch(() => undefined))) {
        // 125 is jail's own failure only when the session is gone: a script may exit 125 and
        // print jail's words too, and must not be taken for "not run".
        throw new JailUnavailableError(`the session ${name} ended: ${bounded(text(r.stderr))}`);
      }
      if (r.code !== 0 && !command.allowFailure) {
        throw Object.assign(new Error(bounded(text(r.stderr)) || `sandbox command failed with exit code ${r.code}`), {
          code: r.code,
          stdout: r.stdout,
          stderr: r.stderr,
        });
      }
      return { code: r.code, stdout: r.stdout, stderr: r.stderr };
    };

    const handle: SandboxBackendHandle = {
      id: BACKEND_ID,
      runtimeId: name,
      runtimeLabel: name,
      workdir: workspaceDir,
      env: params.cfg.docker?.env,
      configLabel: `jail ${status.level}${status.layers ? ` (${status.layers})` : ""}`,
      configLabelKind: "Level",
      workdirRoots: agentWorkspaceDir === workspaceDir ? [workspaceDir] : [workspaceDir, agentWorkspaceDir],
      capabilities: { browser: false },
      async buildExecSpec({ command, workdir, env: vars }) {
        params.assertRuntimeCurrent?.();
        const { args, env: clientEnv } = execEnvironment(vars, env);
        return {
          argv: jail.execArgv(name, ["/bin/sh", "-c", command], { cwd: workdir ?? workspaceDir, env: args }),
          env: clientEnv,
          cwd: workspaceDir,
          // OpenClaw asks no sandboxed exec for a pty (bash-tools: `usePty = params.pty && !sandbox`),
          // and its own backends close stdin then: so here.
          stdinMode: "pipe-closed",
          assertCurrent: params.assertRuntimeCurrent,
        };
      },
      runShellCommand,
      createFsBridge: ({ sandbox }: { sandbox: SandboxContext }) =>
        createRemoteShellSandboxFsBridge({
          sandbox,
          runtime: {
            remoteWorkspaceDir: workspaceDir,
            remoteAgentWorkspaceDir: agentWorkspaceDir,
            runRemoteShellScript: runShellCommand,
          },
        }),
    };
    return handle;
  };

  const manager: SandboxBackendManager = {
    // `openclaw sandbox list`: the level is the one the session's supervisor reports now (on the
    // host), beside the label recorded when the sandbox was made; a different level is a mismatch.
    async describeRuntime({ entry }) {
      const info = await cli()
        .find(entry.containerName)
        .catch(() => undefined);
      if (!info) return { running: false, actualConfigLabel: entry.image, configLabelMatch: true };
      const live = `jail ${/^[a-z]{1,16}$/.test(info.level) ? info.level : "unknown"}`;
      const recorded = entry.image ?? "";
      const match = recorded === live || recorded.startsWith(`${live} (`);
      return { running: true, actualConfigLabel: match ? recorded : live, configLabelMatch: match };
    },
    async removeRuntime({ entry }) {
      const jail = cli();
      const info = await jail.find(entry.containerName);
      if (!info) return;
      const { result, outcome } = await jail.stop(entry.containerName);
      if (!outcome) {
        // A stop is acknowledged before its outcome is read: no outcome, no stop.
        if (await jail.find(entry.containerName)) {
          throw new Error(`jail session stop ${entry.containerName} failed (exit ${result.code}): ${text(result.stderr)}`);
        }
        // It ended on its own meanwhile (its idle timeout or its lifetime): what its layer left is in `jail runs`.
        deps.logger.warn(`jail: session ${entry.containerName} had already ended: ${text(result.stderr)}; a --cow layer it left waits in \`jail runs\``);
        return;
      }
      deps.logger.info(describeStop(entry.containerName, outcome));
    },
  };

  return {
    factory,
    manager,
    resolveWorkdir: ({ workspaceDir }) => canonical(workspaceDir),
  };
}

/** A word of the report: a string when UTF-8, else the list of its bytes. */
function word(w: string | number[]): string {
  return printable(typeof w === "string" ? w : Buffer.from(w).toString("utf8"));
}

/** Control characters (a newline in a file name) escaped: one path, one command, never a line of its own. */
export function printable(t: string): string {
  return t.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\x{${c.charCodeAt(0).toString(16)}}`);
}

/**
 * `jail notice` goes into the agent's system prompt. A process already in a reused session could
 * write into that exec's stdout: only jail's own two sentences, one line of printable text,
 * bounded, are taken.
 */
export function noticeText(t: string): string {
  const one = t.replace(/\n/g, " ");
  if (!one.startsWith("You are working inside a sandbox (jail") || one.length > 4000 || /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(one)) return "";
  return one;
}

/** A session exec's command as the tool call it was: the exec tool's shell line, or a file tool's script. */
function toolCall(argv: string[]): string {
  const short = (t: string) => {
    const one = t.replace(/\s+/g, " ").trim();
    return one.length > 160 ? `${one.slice(0, 160)}…` : one;
  };
  if (argv[0] === "/bin/sh" && argv[1] === "-c" && argv[3] === FS_SCRIPT_NAME) {
    return `file tool (${FS_SCRIPT_NAME} ${short(argv.slice(4).join(" "))})`;
  }
  if (argv[0] === "/bin/sh" && argv[1] === "-c" && argv.length === 3) return `exec tool: ${short(argv[2]!)}`;
  return short(argv.join(" "));
}

/**
 * What a stopped session left, from `jail session stop --json`: the --cow run by its id
 * (`cow_run`), and which tool call (exec) changed what. Changes the execs saw with no run to show
 * for them are an error: the edits would be lost without a word.
 */
export function describeStop(name: string, outcome: StopOutcome): string {
  const execs = outcome.report?.execs?.items ?? [];
  const writers = execs.filter((e) => e.wrote.length > 0 || e.wrote_over_limit > 0);
  if (!outcome.cow_run) {
    if (writers.length > 0) {
      throw new Error(
        `jail session stop ${name}: ${writers.length} exec(s) changed files under its --cow roots (e.g. ${word(writers[0]!.wrote[0] ?? "")}) but the outcome names no run to review (cow_run absent): see \`jail runs\``,
      );
    }
    return `jail: session ${name} stopped (${outcome.status}, level ${outcome.level}); nothing changed in a --cow layer`;
  }
  const id = outcome.cow_run;
  const lines = writers.slice(0, 20).map((e) => {
    const cmd = toolCall(e.command.map(word));
    const paths = e.wrote.map(word);
    const more = e.wrote_over_limit > 0 ? ` and ${e.wrote_over_limit} more` : "";
    return `  exec ${e.id} (exit ${e.exit_code ?? "?"}${e.alone ? "" : ", beside others"}): ${cmd}: ${paths.slice(0, 10).join(", ")}${paths.length > 10 ? ` and ${paths.length - 10} more` : ""}${more}`;
  });
  return [
    `jail: session ${name} stopped; its copy-on-write layer waits as run ${id}: review: jail diff ${id}; apply: jail apply ${id}`,
    ...lines,
  ].join("\n");
}
