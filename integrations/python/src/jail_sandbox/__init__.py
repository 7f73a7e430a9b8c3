"""Python access to jail sessions, and a sandbox client for the OpenAI Agents SDK.

`jail_sandbox.JailSession` starts a `jail session`, runs commands in it and stops it;
`jail_sandbox.agents_sdk.JailSandboxClient` (with the `agents` extra) is a sandbox client for
`agents.sandbox.SandboxAgent`.
"""

from .session import (
    EXIT_JAIL_ERROR,
    EXIT_TIMEOUT,
    ExecResult,
    JailError,
    JailNotFound,
    JailSession,
    NotConfined,
    Outcome,
    SessionGone,
    SessionStartError,
    find_jail,
    jail_duration,
)

__all__ = [
    "EXIT_JAIL_ERROR",
    "EXIT_TIMEOUT",
    "ExecResult",
    "JailError",
    "JailNotFound",
    "JailSession",
    "NotConfined",
    "Outcome",
    "SessionGone",
    "SessionStartError",
    "find_jail",
    "jail_duration",
]

__version__ = "0.1.0"
