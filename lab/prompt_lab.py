"""``PromptLab``: read a recorded planner turn's model calls, edit a prompt, replay, compare.

A thin view over :mod:`agentkit.planning.replay`: the trace is the turn's ``calls.jsonl``, the
replay re-renders each call's prompt from the values recovered from the recording (see that
module for when exact re-rendering is impossible and what happens then), and saving writes the
agent's ``prompts/{name}.md`` override atomically. Replaying writes nothing; only the Save
button does. The tables are built by :mod:`lab.prompt_view`.
"""

from __future__ import annotations

import html
from collections.abc import Collection
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit import Agent, ChatModel, create_model
from agentkit.errors import AgentkitError, UsageError
from agentkit.ids import check_id
from agentkit.loop import BackgroundLoop
from agentkit.planning import STAGE_TIMEOUTS
from agentkit.planning.prompts import PROMPT_NAMES, load_prompt
from agentkit.planning.replay import (
    REPLAYED_PURPOSES,
    ReplayedCall,
    TraceNotFoundError,
    check_template,
    replay_turn,
    save_prompt_override,
)
from agentkit.store import ConversationKey
from pydantic import JsonValue

from lab.prompt_view import (
    calls_frame,
    messages_text,
    plans_side_by_side,
    replay_frame,
)

__all__ = ["PromptLab"]


class PromptLab:
    """The model calls of turn *message_id* of *conversation_id*, and a prompt editor.

    *model* (a spec or a ChatModel) is what the replay uses; by default the agent's model;
    typing another spec in the Model field switches. *template* is the prompt opened in the
    editor first; *purposes* limits which recorded calls are replayed (plan only is the
    quickest way to compare plans). Each replayed call has the runtime's stage timeout times
    *timeout_scale* (default: the agent's ``planner.stage_timeout_scale``, as in a real turn).
    Raises :class:`~agentkit.planning.replay.TraceNotFoundError` when the turn has no trace.
    """

    def __init__(
        self,
        agent: Agent,
        conversation_id: str,
        message_id: str,
        *,
        model: str | ChatModel | None = None,
        template: str = "plan",
        purposes: Collection[str] = REPLAYED_PURPOSES,
        timeout_scale: float | None = None,
    ) -> None:
        if template not in PROMPT_NAMES:
            raise UsageError(f"{template!r} is not a planner prompt (known: {PROMPT_NAMES})")
        self.agent = agent
        self.conversation_id = check_id(conversation_id, "conversation")
        self.message_id = check_id(message_id, "message")
        self.records = agent.call_records(conversation_id, message_id)
        if not self.records:
            raise TraceNotFoundError(ConversationKey(agent.id, conversation_id), message_id)
        self.purposes = tuple(purposes)
        self.timeout_scale = (
            agent.config.planner.stage_timeout_scale if timeout_scale is None else timeout_scale
        )
        if self.timeout_scale <= 0:
            raise UsageError(f"timeout_scale must be positive, not {self.timeout_scale}")
        self.replayed: list[ReplayedCall] = []
        self.plans = pd.DataFrame()
        if model is None and isinstance(agent.model, ChatModel):
            model = agent.model
        self._given_model = model if isinstance(model, ChatModel) else None
        self._models: dict[str, ChatModel] = {}
        self._loop: BackgroundLoop | None = None
        spec = model.spec if isinstance(model, ChatModel) else (model or agent.config.model)

        self.calls = widgets.HTML(calls_frame(self.records).to_html(index=False))
        self.call = widgets.Dropdown(
            options=[(f"{i} · {r.purpose}", i) for i, r in enumerate(self.records)],
            description="Call",
        )
        self.call_messages = widgets.Textarea(
            disabled=True, layout=widgets.Layout(width="100%", height="260px")
        )
        self.template_name = widgets.Dropdown(
            options=list(PROMPT_NAMES), value=template, description="Template"
        )
        self.template_source = widgets.HTML()
        self.editor = widgets.Textarea(layout=widgets.Layout(width="100%", height="300px"))
        self.model = widgets.Text(value=spec, description="Model")
        self.rerun_button = widgets.Button(description="Re-run turn", button_style="primary")
        self.save_button = widgets.Button(description="Save as agent override")
        self.status = widgets.HTML()
        self.plan_table = widgets.HTML()
        self.replay_table = widgets.HTML()
        self.call.observe(self._on_call, names="value")
        self.template_name.observe(self._on_template, names="value")
        self.rerun_button.on_click(self._on_rerun)
        self.save_button.on_click(self._on_save)
        self._show_call()
        self._load_template()
        header = (
            f"<b>Prompt lab</b>: {html.escape(agent.id)} / {html.escape(conversation_id)} / "
            f"{html.escape(message_id)} ({len(self.records)} model calls)"
        )
        self.widget = widgets.VBox([
            widgets.HTML(header),
            self.calls,
            self.call,
            self.call_messages,
            widgets.HBox([self.template_name, self.template_source]),
            self.editor,
            widgets.HBox([self.model, self.rerun_button, self.save_button]),
            self.status,
            self.plan_table,
            self.replay_table,
        ])  # fmt: skip
        self.widget.add_class("agentkit-prompt-lab")
        self.status.add_class("agentkit-lab-status")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:  # noqa: ANN401 - IPython's protocol
        return self.widget._repr_mimebundle_(**kwargs)

    # -- showing --------------------------------------------------------------------------

    def _show_call(self) -> None:
        if self.call.value is None:
            self.call_messages.value = "(this turn made no model calls)"
            return
        record = self.records[self.call.value]
        reply = f"\n\n── reply ──\n{record.raw}" if record.raw else ""
        error = f"\n\n── error ──\n{record.error}" if record.error else ""
        self.call_messages.value = messages_text(record.messages) + reply + error

    def _load_template(self) -> None:
        name = self.template_name.value
        override = self.agent.folder.files.prompt(name)
        self.editor.value = load_prompt(name, self.agent.folder.path).template
        where = "agent override" if override.is_file() else "package default"
        self.template_source.value = f"&nbsp;{where}"

    def _on_call(self, _: dict[str, Any]) -> None:
        self._show_call()

    def _on_template(self, _: dict[str, Any]) -> None:
        self._load_template()

    def _show_error(self, error: Exception) -> None:
        self.status.value = f'<span style="color:#b00020">{html.escape(str(error))}</span>'

    # -- actions --------------------------------------------------------------------------

    def chat_model(self) -> ChatModel:
        """The model given, else the one the Model field names (created once per spec)."""
        spec = self.model.value.strip()
        if self._given_model is not None and spec == self._given_model.spec:
            return self._given_model
        if spec not in self._models:
            created = create_model(spec, base_dir=self.agent.folder.path)
            if not isinstance(created, ChatModel):
                raise UsageError(f"the replay needs a chat model; {spec!r} is a session backend")
            self._models[spec] = created
        return self._models[spec]

    @property
    def old_plan(self) -> JsonValue:
        """The plan the turn got (after its repair round, if any); None without a plan call."""
        return next((c.old_parsed for c in self.replayed if c.purpose == "plan"), None)

    @property
    def new_plan(self) -> JsonValue:
        return next((c.new_parsed for c in self.replayed if c.purpose == "plan"), None)

    def rerun(self) -> list[ReplayedCall]:
        """Replay the turn's calls with the editor's template; fills the tables.

        A template with bad syntax or an unknown placeholder raises before any model call."""
        name, text = self.template_name.value, self.editor.value
        check_template(name, text)
        model = self.chat_model()
        scale = self.timeout_scale
        timeouts = {purpose: seconds * scale for purpose, seconds in STAGE_TIMEOUTS.items()}
        if self._loop is None:
            self._loop = BackgroundLoop()
        self.replayed = self._loop.run(
            replay_turn(
                self.records,
                model,
                templates={name: text},
                agent_dir=self.agent.folder.path,
                purposes=self.purposes,
                tools=self.agent.tools,
                max_steps=self.agent.config.planner.max_steps,
                timeouts=timeouts,
            )
        )
        has_plan = any(call.purpose == "plan" for call in self.replayed)
        self.plans = (
            plans_side_by_side(self.old_plan, self.new_plan) if has_plan else pd.DataFrame()
        )
        self.plan_table.value = (
            self.plans.to_html(index=False) if has_plan else "<i>this turn made no plan call</i>"
        )
        self.replay_table.value = replay_frame(self.replayed).to_html(index=False)
        verbatim = sum(1 for call in self.replayed if not call.template)
        failed = sum(1 for call in self.replayed if call.error or call.problem)
        self.status.value = html.escape(
            f"replayed {len(self.replayed)} calls with {model.spec or type(model).__name__}"
            + (f"; {failed} unusable" if failed else "")
            + (f"; {verbatim} sent as recorded (no template reproduces them)" if verbatim else "")
        )
        return self.replayed

    def save(self) -> Path:
        """Write the editor's text as the agent's override of the selected prompt."""
        path = save_prompt_override(
            self.agent.folder.path, self.template_name.value, self.editor.value
        )
        self.template_source.value = "&nbsp;agent override"
        self.status.value = html.escape(f"saved {path}")
        return path

    def _on_rerun(self, _: widgets.Button) -> None:
        self.rerun_button.disabled = True
        try:
            self.rerun()
        except AgentkitError as error:
            self._show_error(error)
        finally:
            self.rerun_button.disabled = False

    def _on_save(self, _: widgets.Button) -> None:
        try:
            self.save()
        except AgentkitError as error:
            self._show_error(error)

    def close(self) -> None:
        """Release the models the lab created and its event loop."""
        if self._loop is not None:
            for model in self._models.values():
                self._loop.run(model.aclose())
            self._loop.close()
            self._loop = None
        self._models.clear()
