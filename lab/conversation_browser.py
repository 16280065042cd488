"""``ConversationBrowser``: a data root's agents → conversations → messages and turn logs.

A thin view over :mod:`lab.conversation_tables`: pick an agent, then one of its conversations,
then one of its turns; each level is a pandas table (also kept as attributes, ``agents``,
``conversations``, ``messages`` and ``turns``, for further work in the notebook). Agents are
opened without a model, so browsing never loads model weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit import Agent, AgentkitError, resolve_data_dir

from lab._html import frame_html, notice_html, pre_html
from lab.conversation_tables import (
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    agents_frame,
    conversations_frame,
    messages_frame,
    turns_frame,
)

__all__ = ["ConversationBrowser"]


class ConversationBrowser(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Browse every agent's conversations under *data_dir* (``$AGENTKIT_DATA_DIR`` by default)."""

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = resolve_data_dir(data_dir)
        self.opened: dict[str, Agent] = {}
        self._syncing = False
        self.agents = agents_frame(self.data_dir)
        self.conversations = _empty(CONVERSATION_COLUMNS)
        self.messages = _empty(MESSAGE_COLUMNS)
        self.turns = _empty(TURN_COLUMNS)

        wide = {"description_width": "initial"}
        self.agent_choice = widgets.Dropdown(description="Agent", style=wide)
        self.conversation_choice = widgets.Dropdown(
            description="Conversation", layout={"width": "60%"}, style=wide
        )
        self.turn_choice = widgets.Dropdown(description="Turn", layout={"width": "60%"}, style=wide)
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.agents_table = widgets.HTML()
        self.conversations_table = widgets.HTML()
        self.messages_table = widgets.HTML()
        self.turns_table = widgets.HTML()
        self.turn_log = widgets.HTML()
        self.turn_log.add_class("agentkit-browser-turn-log")
        self.notice = widgets.HTML()

        self.agent_choice.observe(self._on_agent, names="value")
        self.conversation_choice.observe(self._on_conversation, names="value")
        self.turn_choice.observe(self._on_turn, names="value")
        self.refresh_button.on_click(lambda _: self.refresh())

        tabs = widgets.Tab(
            [self.messages_table, self.turns_table, self.turn_log],
            titles=("Messages", "Turns", "Turn log"),
        )
        super().__init__(
            [
                widgets.HTML(f"<b>Data root</b> {self.data_dir}"),
                self.agents_table,
                widgets.HBox([self.agent_choice, self.refresh_button]),
                self.conversations_table,
                self.conversation_choice,
                self.turn_choice,
                tabs,
                self.notice,
            ]
        )
        self.add_class("agentkit-conversation-browser")
        self.refresh()

    def agent(self, agent_id: str) -> Agent:
        """The opened agent *agent_id* (opened once, without a model)."""
        if agent_id not in self.opened:
            self.opened[agent_id] = Agent.open(agent_id, data_dir=self.data_dir)
        return self.opened[agent_id]

    def refresh(self) -> None:
        """Read the data root again, keeping the current choices where they still exist."""
        self.agents = agents_frame(self.data_dir)
        self.agents_table.value = frame_html(
            self.agents,
            empty="No agents under this data root.",
            css_class="agentkit-browser-agents",
        )
        ids = list(self.agents["agentId"])
        current = self.agent_choice.value
        with self._quiet():
            self.agent_choice.options = ids
            self.agent_choice.value = current if current in ids else (ids[0] if ids else None)
        self._show_agent(self.agent_choice.value)

    def select(
        self, agent_id: str, conversation_id: str | None = None, message_id: str | None = None
    ) -> None:
        """Show *agent_id*'s conversation (and turn), as if picked in the dropdowns."""
        self.agent_choice.value = agent_id
        if conversation_id is not None:
            self.conversation_choice.value = conversation_id
        if message_id is not None:
            self.turn_choice.value = message_id

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        """Change the dropdowns from code without their observers redrawing half-way."""
        self._syncing = True
        try:
            yield
        finally:
            self._syncing = False

    def _on_agent(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_agent(change["new"])

    def _show_agent(self, agent_id: str | None) -> None:
        self.notice.value = ""
        if agent_id is None:
            self.conversations = _empty(CONVERSATION_COLUMNS)
        else:
            try:
                self.conversations = conversations_frame(self.agent(agent_id))
            except AgentkitError as error:
                self.notice.value = notice_html(str(error), "error")
                self.conversations = _empty(CONVERSATION_COLUMNS)
        self.conversations_table.value = frame_html(
            self.conversations,
            empty="No conversations yet.",
            css_class="agentkit-browser-conversations",
        )
        ids = list(self.conversations["conversationId"])
        current = self.conversation_choice.value
        with self._quiet():
            self.conversation_choice.options = [
                (f"{title} · {cid}", cid)
                for title, cid in zip(self.conversations["title"], ids, strict=True)
            ]
            self.conversation_choice.value = (
                current if current in ids else (ids[0] if ids else None)
            )
        self._show_conversation(self.conversation_choice.value)

    def _on_conversation(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_conversation(change["new"])

    def _show_conversation(self, conversation_id: str | None) -> None:
        agent_id = self.agent_choice.value
        if conversation_id is None or agent_id is None:
            self.messages, self.turns = _empty(MESSAGE_COLUMNS), _empty(TURN_COLUMNS)
        else:
            agent = self.agent(agent_id)
            try:
                self.messages = messages_frame(agent, conversation_id)
                self.turns = turns_frame(agent, conversation_id)
            except AgentkitError as error:  # deleted meanwhile
                self.notice.value = notice_html(str(error), "error")
                self.messages, self.turns = _empty(MESSAGE_COLUMNS), _empty(TURN_COLUMNS)
        self.messages_table.value = frame_html(
            self.messages, empty="No messages.", css_class="agentkit-browser-messages"
        )
        self.turns_table.value = frame_html(
            self.turns, empty="No turns.", css_class="agentkit-browser-turns"
        )
        ids = list(self.turns["messageId"])
        with self._quiet():
            self.turn_choice.options = ids
            self.turn_choice.value = ids[-1] if ids else None
        self._show_turn(self.turn_choice.value)

    def _on_turn(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_turn(change["new"])

    def _show_turn(self, message_id: str | None) -> None:
        agent_id, conversation_id = self.agent_choice.value, self.conversation_choice.value
        if message_id is None or agent_id is None or conversation_id is None:
            self.turn_log.value = "<i>No turn selected.</i>"
            return
        try:
            text = self.agent(agent_id).turn_log(conversation_id, message_id)
        except AgentkitError as error:
            self.turn_log.value = notice_html(str(error), "error")
            return
        self.turn_log.value = pre_html(text or "(empty log)")


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame(columns=list(columns))
