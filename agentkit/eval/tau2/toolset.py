"""A τ² task's environment as an agent's toolset, and the run's trajectory in τ²'s terms.

A τ² scenario's config names its toolset as ``{"python": "agentkit.eval.tau2.toolset:KEY"}``
(KEY: ``DOMAIN__POSITION``, :mod:`agentkit.eval.tau2.catalog`). The module resolves any such
attribute (PEP 562 ``__getattr__``) to a factory that builds, when the run's agent starts,
the task's environment: the domain's ``get_environment`` (on the database parsed once,
:mod:`~agentkit.eval.tau2.environments`), set to the task's initial state (its initialisation
data and actions, the user's side included) as τ²'s orchestrator sets it.

* Each of the domain's agent tools becomes a tool with τ²'s own JSON schema (``openai_schema``);
  a tool τ² marks ``WRITE`` is side-effecting, so agentkit's gate asks the user's consent
  before it runs. A call runs as τ²'s orchestrator runs it (``Environment.get_response``: the
  tool's answer as JSON text, or ``Error: …``).
* :class:`Tau2Run` keeps the run's trajectory as τ² messages (the agent's first message as τ²'s
  orchestrator sends it, the user's messages and tool calls, the agent's tool calls and
  answers, the tool messages) and how the user ended it; the toolset's snapshot is that
  record, so the scorer reads it from the transcript and never re-runs anything. The user's
  side (:mod:`~agentkit.eval.tau2.user`) finds the run by the agent's folder (a run's data
  root is its own) and calls the user's tools on the same environment.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import JsonValue

from agentkit.errors import UsageError
from agentkit.eval.tau2._package import tau2_module
from agentkit.eval.tau2.catalog import Tau2Task, find_task
from agentkit.eval.tau2.environments import new_environment
from agentkit.tools import Tool, ToolContext, Toolset
from agentkit.tools.registry import SchemaArgs, ToolFailedError, schema_args_model

__all__ = [
    "MODULE",
    "TOOLSET",
    "Tau2Run",
    "Tau2Toolset",
    "first_agent_message",
    "run_for",
    "start_run",
    "toolset_spec",
]

#: the module a scenario's config names
MODULE: Final = "agentkit.eval.tau2.toolset"
#: the toolset's name in the agent's config and in the state snapshot
TOOLSET: Final = "tau2"
Requestor = Literal["assistant", "user"]


def first_agent_message() -> str:
    """The agent's first message, as τ²'s orchestrator sends it before the user speaks."""
    return str(tau2_module("orchestrator.orchestrator").DEFAULT_FIRST_AGENT_MESSAGE.content)


def toolset_spec(task: Tau2Task) -> dict[str, JsonValue]:
    """The ``toolsets`` entry of a scenario's config for *task*."""
    return {"python": f"{MODULE}:{task.key}", "name": TOOLSET}


@dataclass
class Tau2Run:
    """One run's τ² environment and trajectory (see the module docstring)."""

    task: Tau2Task
    env: Any
    #: the trajectory, as τ² message dicts (``role`` assistant / user / tool)
    messages: list[dict[str, JsonValue]] = field(default_factory=list)
    #: the user's stop token that ended the conversation (None: it did not end so)
    stop: str | None = None
    calls: int = 0

    def call(self, name: str, arguments: Mapping[str, Any], requestor: Requestor) -> Any:  # noqa: ANN401
        """Run one tool call as τ²'s orchestrator does; record the call and its message."""
        self.calls += 1
        tool_call = tau2_module("data_model.message").ToolCall(
            id=f"{requestor}-{self.calls}",
            name=name,
            arguments=copy.deepcopy(dict(arguments)),
            requestor=requestor,
        )
        response = self.env.get_response(tool_call)
        self.messages.append(
            {"role": requestor, "content": None, "tool_calls": [tool_call.model_dump(mode="json")]}
        )
        self.messages.append(
            {
                "role": "tool",
                "id": tool_call.id,
                "content": response.content,
                "requestor": requestor,
                "error": bool(response.error),
            }
        )
        return response

    def say(self, role: Requestor, text: str) -> None:
        """Record a message (the agent's answer, the user's words)."""
        self.messages.append({"role": role, "content": text})

    def snapshot(self) -> dict[str, JsonValue]:
        """The trajectory so far and how it ended (plain JSON: the toolset's state)."""
        messages: list[JsonValue] = [copy.deepcopy(message) for message in self.messages]
        return {
            "domain": self.task.domain,
            "task": self.task.id,
            "messages": messages,
            "stop": self.stop,
        }


def start_run(task: Tau2Task) -> Tau2Run:
    """A fresh environment of *task*, set to its initial state, with τ²'s first message."""
    env = new_environment(task.domain)
    initial = task.task.initial_state
    env.set_state(
        initialization_data=initial.initialization_data if initial is not None else None,
        initialization_actions=initial.initialization_actions if initial is not None else None,
        message_history=[],
    )
    run = Tau2Run(task, env)
    run.say("assistant", first_agent_message())
    return run


#: the runs going on in this process, by the run's agent folder (a run's data root is its
#: own; a kept run tried again is written afresh in the same folder, so the key holds when
#: its config.json was written), the latest few only
_RUNS: OrderedDict[tuple[Path, tuple[int, int]], Tau2Run] = OrderedDict()
_RUNS_KEPT = 64


def _written(folder: Path) -> tuple[int, int]:
    try:
        stat = (folder / "config.json").stat()
    except OSError:
        return (0, 0)
    return (stat.st_ino, stat.st_mtime_ns)


def run_for(folder: Path, task: Tau2Task | None = None) -> Tau2Run:
    """The run of the agent in *folder* (started for *task* the first time)."""
    key = (folder.resolve(), _written(folder))
    run = _RUNS.get(key)
    if run is None:
        if task is None:
            raise LookupError(f"no tau2 run in {folder}")
        run = _RUNS[key] = start_run(task)
        while len(_RUNS) > _RUNS_KEPT:
            _RUNS.popitem(last=False)
    _RUNS.move_to_end(key)
    return run


class Tau2Toolset(Toolset):
    """The agent's tools of one τ² run (see the module docstring)."""

    def __init__(self, run: Tau2Run) -> None:
        self.name = TOOLSET
        self.run = run
        write = tau2_module("environment.toolkit").ToolType.WRITE
        kit = run.env.tools
        tools: list[Tool[Any]] = []
        for name, spec in sorted(kit.get_tools().items()):
            schema = spec.openai_schema["function"]
            tools.append(
                Tool(
                    name=name,
                    description=str(schema.get("description") or name),
                    args_model=schema_args_model(name, schema.get("parameters") or {}),
                    handler=self._calling(name),
                    side_effect=kit.tool_type(name) == write,
                    live_state=False,
                    source="tau2",
                )
            )
        self._tools = tuple(tools)

    def tools(self) -> tuple[Tool[Any], ...]:
        return self._tools

    def snapshot(self) -> JsonValue:
        """The run's trajectory so far, in τ²'s terms."""
        return self.run.snapshot()

    def _calling(self, name: str) -> Callable[[SchemaArgs], object]:
        def call(args: SchemaArgs) -> object:
            response = self.run.call(name, args.arguments(), "assistant")
            if response.error:
                raise ToolFailedError(str(response.content))
            return str(response.content)

        return call


def _factory(key: str) -> Callable[[ToolContext], Toolset]:
    def build(context: ToolContext) -> Toolset:
        return Tau2Toolset(run_for(context.agent_dir, find_task(key)))

    return build


def __getattr__(name: str) -> Callable[[ToolContext], Toolset]:
    """``toolset:DOMAIN__POSITION`` → the factory of that task's toolset."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        find_task(name)
    except (LookupError, ValueError, UsageError) as error:
        raise AttributeError(f"no tau2 task {name!r}: {error}") from None
    return _factory(name)
