// The OpenClaw plugin entry: registers the `jail` sandbox backend
// (`agents.defaults.sandbox.backend: "jail"`), configured under `plugins.entries.jail.config`.
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";
import { registerSandboxBackend, resolveSandboxRuntimeStatus } from "openclaw/plugin-sdk/sandbox";
import { BACKEND_ID, createJailSandboxBackend, explanations, type JailPluginConfig } from "./backend.js";

export { BACKEND_ID, createJailSandboxBackend, planSession, execEnvironment } from "./backend.js";

function readConfig(raw: Record<string, unknown> | undefined): JailPluginConfig {
  const c = raw ?? {};
  const out: JailPluginConfig = {};
  if (typeof c.binary === "string") out.binary = c.binary;
  if (c.workspaceWrites === "cow" || c.workspaceWrites === "direct") out.workspaceWrites = c.workspaceWrites;
  if (c.require === "full") out.require = "full";
  if (typeof c.profile === "string") out.profile = c.profile;
  if (Array.isArray(c.extraArgs) && c.extraArgs.every((a) => typeof a === "string")) out.extraArgs = c.extraArgs as string[];
  return out;
}

export default definePluginEntry({
  id: "jail",
  name: "jail sandbox",
  description: "Runs sandboxed tool calls in a jail session: a read-only mount view, Landlock and seccomp, enforced by the kernel",
  register(api) {
    // The sandbox's explanation, in the agent's own system prompt: what jail enforces, at what level.
    api.on("before_prompt_build", (_event, ctx) => {
      const explanation = ctx.sessionKey ? explanations.get(ctx.sessionKey) : undefined;
      return explanation ? { appendSystemContext: explanation } : undefined;
    });
    if (api.registrationMode !== "full") return;
    const pluginConfig = readConfig(api.pluginConfig);
    const registration = createJailSandboxBackend({
      pluginConfig,
      logger: { info: (m) => api.logger.info(m), warn: (m) => api.logger.warn(m) },
      isRequired: (sessionKey) => {
        try {
          return resolveSandboxRuntimeStatus({ cfg: api.config, sessionKey }).sandboxRequired === true;
        } catch {
          // Unknown: treat as required. A session that cannot get the full level then fails.
          return true;
        }
      },
    });
    const unregister = registerSandboxBackend(BACKEND_ID, registration);
    api.lifecycle.registerRuntimeLifecycle({
      id: "jail-sandbox-backend",
      cleanup: ({ reason, sessionKey, runId }) => {
        if (sessionKey !== undefined || runId !== undefined) return;
        if (reason === "disable" || reason === "restart") unregister();
      },
    });
  },
});
