"""`python -m jail_sandbox.demo [PROJECT]`: a SandboxAgent run in jail, offline.

A scripted model (no key, no network) makes the tool calls an agent would; the Agents SDK's
own Runner, shell tool and apply_patch tool carry them out through JailSandboxClient. First
with PROJECT read-only (every write fails with the kernel's EROFS), then with PROJECT behind a
copy-on-write layer (the edits come back as one jail run, for `jail diff` / `jail apply`).
Without PROJECT, a small one is made in a temporary directory.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from agents import Runner
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig

from .agents_sdk import JailSandboxClient, JailSandboxClientOptions
from .scripted import Exec, Patch, Say, ScriptedModel, ScriptedProvider


async def _run(client: JailSandboxClient, project: Path, mode: str, steps: list) -> None:
    model = ScriptedModel(steps=steps)
    calls = {c.call_id: c for step in steps if not isinstance(step, Say) for c in step}
    agent = SandboxAgent(name="demo", instructions="Use the tools.", model="scripted")
    config = RunConfig(
        model_provider=ScriptedProvider(model),
        tracing_disabled=True,
        sandbox=SandboxRunConfig(
            client=client, options=JailSandboxClientOptions(workspace=str(project), mode=mode)
        ),
    )
    print(f"\n== {project} as --{mode}")
    await Runner.run(agent, "demo", run_config=config)
    for call_id, output in model.outputs.items():
        call = calls[call_id]
        what = call.cmd if isinstance(call, Exec) else "apply_patch " + call.patch.split("\n")[1]
        body = output.split("\nOutput:\n", 1)[-1].strip()
        code = next((ln for ln in output.splitlines() if ln.startswith("Process exited")), "")
        lines = [_printable(line) for line in body.splitlines()[:4]]
        print(f"$ {what}\n  {code}\n  " + "\n  ".join(lines))


def _printable(text: str) -> str:
    """A line of what a command printed, its control characters escaped: the project's
    content (`tail -1 README.md`) never reaches the terminal as escape sequences."""
    return "".join(
        c if c == "\t" or (c.isprintable() and not 0x80 <= ord(c) < 0xA0) else repr(c)[1:-1]
        for c in text
    )


def main(argv: list[str]) -> int:
    if argv:
        project = Path(argv[0]).resolve()
    else:
        project = Path(tempfile.mkdtemp(prefix="jail-demo-"))
        (project / "README.md").write_text("a project\n")
    client = JailSandboxClient()
    print(f"jail: {client.jail}")
    add_notes = "*** Begin Patch\n*** Add File: NOTES.md\n+written by the agent\n*** End Patch\n"
    asyncio.run(
        _run(
            client,
            project,
            "ro",
            [
                [Exec(f"{client.jail} status | head -2", "status")],
                [Exec("echo edit >> README.md", "write")],
                [Patch(add_notes, "patch")],
                Say("done"),
            ],
        )
    )
    asyncio.run(
        _run(
            client,
            project,
            "cow",
            [
                [Exec("echo 'edited by the agent' >> README.md && tail -1 README.md", "write")],
                [Patch(add_notes, "patch")],
                Say("done"),
            ],
        )
    )
    outcome = client.outcomes[-1]
    print(f"\nsession {outcome.name}: {outcome.status}, level {outcome.level}")
    for item in outcome.execs:
        if item["wrote"]:
            # the paths are the command's: repr, never raw onto the terminal
            print(f"exec {item['id']} changed {', '.join(repr(p) for p in item['wrote'])}")
    if outcome.cow_run is not None:
        run_id = outcome.cow_run
        print(f"the edits wait as run {run_id}: jail diff {run_id}; jail apply {run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
