"""A scripted model for the Agents SDK: no network, no key, the tool calls given in advance.

Each turn of the Runner takes the next step of the script: tool calls the model "makes"
(`exec_command`, the SDK's shell tool; `apply_patch`, its file editor) or a final answer.
The outputs the SDK hands back for each call are kept in `outputs` (by call id), exactly as a
real model would read them. Used by the tests and by `python -m jail_sandbox.demo`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.usage import Usage
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

__all__ = ["Exec", "Patch", "Say", "ScriptedModel", "ScriptedProvider"]


@dataclass
class Exec:
    """A call of the SDK's `exec_command` tool (its arguments as the model sends them)."""

    cmd: str
    call_id: str
    yield_time_ms: int | None = None
    workdir: str | None = None

    def item(self) -> ResponseFunctionToolCall:
        args: dict[str, Any] = {"cmd": self.cmd}
        if self.yield_time_ms is not None:
            args["yield_time_ms"] = self.yield_time_ms
        if self.workdir is not None:
            args["workdir"] = self.workdir
        return ResponseFunctionToolCall(
            type="function_call",
            name="exec_command",
            arguments=json.dumps(args),
            call_id=self.call_id,
            id=f"fc_{self.call_id}",
            status="completed",
        )


@dataclass
class Patch:
    """A call of the SDK's `apply_patch` tool (a freeform V4A patch)."""

    patch: str
    call_id: str

    def item(self) -> ResponseCustomToolCall:
        return ResponseCustomToolCall(
            type="custom_tool_call",
            name="apply_patch",
            input=self.patch,
            call_id=self.call_id,
            id=f"ctc_{self.call_id}",
        )


@dataclass
class Say:
    """The final answer, which ends the run."""

    text: str

    def item(self) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg_final",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=self.text, annotations=[])],
        )


Step = Sequence[Exec | Patch] | Say


@dataclass
class ScriptedModel(Model):
    steps: list[Step]
    outputs: dict[str, str] = field(default_factory=dict)
    """What the SDK returned to the model for each call id."""
    tool_names: list[list[str]] = field(default_factory=list)
    """The tools the SDK offered, each turn."""
    turns: int = 0

    def _record(self, input: str | list[Any]) -> None:
        if isinstance(input, str):
            return
        for item in input:
            data = item if isinstance(item, dict) else getattr(item, "model_dump", dict)()
            if data.get("type") in ("function_call_output", "custom_tool_call_output"):
                output = data.get("output")
                if not isinstance(output, str):
                    output = json.dumps(output)
                self.outputs[str(data.get("call_id"))] = output

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self._record(input)
        self.tool_names.append([getattr(t, "name", "?") for t in tools])
        step: Step = self.steps.pop(0) if self.steps else Say("script finished")
        self.turns += 1
        items = [step.item()] if isinstance(step, Say) else [call.item() for call in step]
        return ModelResponse(output=items, usage=Usage(), response_id=f"resp_{self.turns}")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model answers Runner.run, not run_streamed")


@dataclass
class ScriptedProvider(ModelProvider):
    """Resolves every model name to one scripted model (`RunConfig(model_provider=...)`)."""

    model: ScriptedModel

    def get_model(self, model_name: str | None) -> Model:
        return self.model
