// `openclaw/plugin-sdk/sandbox` ships JavaScript only (no .d.ts in openclaw@2026.9.6). These are
// the shapes this plugin uses, copied from the types the package does ship
// (dist/plugin-entry-*.d.ts: SandboxBackendHandle, SandboxFsBridge, SandboxFsBridgeContext) and
// from the code of dist/backend-*.mjs (registerSandboxBackend, the factory's parameters) and
// dist/ssh-backend-*.mjs (createRemoteShellSandboxFsBridge).
declare module "openclaw/plugin-sdk/sandbox" {
  export type SandboxBackendCommandParams = {
    script: string;
    args?: string[];
    stdin?: Buffer | string;
    allowFailure?: boolean;
    signal?: AbortSignal;
  };
  export type SandboxBackendCommandResult = { stdout: Buffer; stderr: Buffer; code: number };
  export type SandboxBackendExecSpec = {
    argv: string[];
    env: NodeJS.ProcessEnv;
    cwd?: string;
    stdinMode: "pipe-open" | "pipe-closed";
    assertCurrent?: () => void;
    finalizeToken?: unknown;
  };
  /** What resolveSandboxContext builds around a backend handle (SandboxFsBridgeContext and more). */
  export type SandboxContext = {
    workspaceDir: string;
    agentWorkspaceDir: string;
    skillsWorkspaceDir?: string;
    workspaceAccess: "none" | "ro" | "rw";
    containerName: string;
    containerWorkdir: string;
    docker: { binds?: string[]; tmpfs?: string[] };
    [key: string]: unknown;
  };
  export type SandboxFsBridge = Record<string, unknown>;
  export type SandboxBackendHandle = {
    id: string;
    runtimeId: string;
    runtimeLabel: string;
    workdir: string;
    env?: Record<string, string>;
    configLabel?: string;
    configLabelKind?: string;
    workdirRoots?: readonly string[];
    capabilities?: { browser?: boolean; readOnlyResourceMounts?: boolean };
    buildExecSpec(params: {
      command: string;
      workdir?: string;
      env: Record<string, string>;
      usePty: boolean;
    }): Promise<SandboxBackendExecSpec>;
    finalizeExec?: (params: {
      status: "completed" | "failed";
      exitCode: number | null;
      timedOut: boolean;
      token?: unknown;
    }) => Promise<void>;
    runShellCommand(params: SandboxBackendCommandParams): Promise<SandboxBackendCommandResult>;
    createFsBridge?: (params: { sandbox: SandboxContext }) => SandboxFsBridge;
  };
  /** The resolved `agents.*.sandbox` block a factory receives as `cfg`. */
  export type SandboxConfig = {
    mode: "off" | "non-main" | "all";
    backend: string;
    scope: "agent" | "session" | "shared";
    workspaceAccess: "none" | "ro" | "rw";
    workspaceRoot?: string;
    docker: { env?: Record<string, string>; network?: string; binds?: string[]; [k: string]: unknown };
    prune: { idleHours: number; maxAgeDays: number };
    [key: string]: unknown;
  };
  /** createSandboxBackend's parameters (dist/context-*.mjs, resolveProvisionedSandboxContext). */
  export type SandboxBackendFactoryParams = {
    sessionKey: string;
    scopeKey: string;
    workspaceDir: string;
    agentWorkspaceDir: string;
    skillsWorkspaceDir?: string;
    readOnlyResourceMounts?: Array<{ hostPath: string; containerPath: string }>;
    workspaceSource?: string;
    cfg: SandboxConfig;
    runtimeId?: string;
    assertRuntimeCurrent?: () => void;
  };
  /** A registry row (dist/registry-*.mjs), as the manager's calls receive it. */
  export type SandboxRegistryEntry = {
    containerName: string;
    backendId?: string;
    runtimeLabel?: string;
    sessionKey: string;
    createdAtMs: number;
    lastUsedAtMs: number;
    image?: string;
    configLabelKind?: string;
    workspaceDir?: string;
  };
  export type SandboxBackendManager = {
    describeRuntime(params: {
      entry: SandboxRegistryEntry;
      config: unknown;
      agentId?: string;
    }): Promise<{ running: boolean; actualConfigLabel?: string; configLabelMatch: boolean }>;
    removeRuntime(params: { entry: SandboxRegistryEntry; config: unknown; agentId?: string }): Promise<void>;
  };
  export type SandboxBackendRegistration = {
    factory: (params: SandboxBackendFactoryParams) => Promise<SandboxBackendHandle>;
    manager?: SandboxBackendManager;
    resolveWorkdir?: (params: { workspaceDir: string; scopeKey: string; sessionKey: string }) => string | undefined;
    capabilities?: { readOnlyResourceMounts?: boolean };
  };
  export function registerSandboxBackend(
    id: string,
    registration: SandboxBackendRegistration | SandboxBackendRegistration["factory"],
  ): () => void;
  export function createRemoteShellSandboxFsBridge(params: {
    sandbox: SandboxContext;
    runtime: {
      remoteWorkspaceDir: string;
      remoteAgentWorkspaceDir: string;
      runRemoteShellScript(params: SandboxBackendCommandParams): Promise<SandboxBackendCommandResult>;
    };
  }): SandboxFsBridge;
  export function resolveSandboxRuntimeStatus(params: {
    cfg: unknown;
    sessionKey: string;
    agentId?: string;
  }): { sandboxed: boolean; sandboxRequired?: boolean; agentId: string };
}
