"""Python access to jail sessions, and a sandbox client for the OpenAI Agents SDK.

`jail_sandbox.JailSession` starts a `jail session`, runs commands in it and stops it;
`jail_sandbox.agents_sdk.JailSandboxClient` (with the `agents` extra) is a sandbox client for
`agents.sandbox.SandboxAgent`.
"""

# The session module's public names are the package's (one list, in session.py).
from .session import *  # noqa: F403
from .session import __all__  # noqa: F401

__version__ = "0.1.0"
