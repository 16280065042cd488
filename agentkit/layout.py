"""Where everything lives under a data root: the one owner of the on-disk layout.

::

    {root}/
      agentkit.db                               system_config: TaskState, ExecutionState, …
      agents/{agentId}/                         an agent folder: config.json, prompt files
        prompts/{name}.md                       the agent's prompt template overrides
        workspace/                              the agent's working folder (its tools' data)
        conversations/
          .{conversationId}.lock                the writer lock (beside the data)
          {conversationId}/
            journal.log                         the source of truth (see agentkit.store.files)
            meta.json  history.json             views of the journal
            turn-events.log                     the last turn's events (serve --workers N)
            {messageId}/messages.log            the turn log
            {messageId}/calls.jsonl             every model call of a turn (its call records)

Every other module asks this one for a path instead of joining names itself, so the layout is
written down once. Ids are checked (a full match of the id rule) before a path is built; the
file store additionally checks that a resolved path stays under the root. Pure path
arithmetic: nothing here touches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentkit.ids import check_id

__all__ = [
    "CALLS_FILE",
    "CONFIG_DB",
    "HISTORY_FILE",
    "JOURNAL_FILE",
    "META_FILE",
    "TURN_EVENTS_FILE",
    "TURN_LOG_FILE",
    "AgentPaths",
    "ConversationPaths",
    "DataLayout",
]

#: the ``system_config`` database under the data root
CONFIG_DB = "agentkit.db"
JOURNAL_FILE = "journal.log"
META_FILE = "meta.json"
HISTORY_FILE = "history.json"
TURN_LOG_FILE = "messages.log"
CALLS_FILE = "calls.jsonl"
#: a running turn's events, for the server's other processes (agentkit.store.file_events)
TURN_EVENTS_FILE = "turn-events.log"
_AGENTS = "agents"
_CONVERSATIONS = "conversations"
_PROMPTS = "prompts"
_WORKSPACE = "workspace"
_CONFIG = "config.json"


class _Key(Protocol):
    @property
    def agent_id(self) -> str: ...

    @property
    def conversation_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ConversationPaths:
    """The files of one conversation folder."""

    dir: Path

    @property
    def journal(self) -> Path:
        return self.dir / JOURNAL_FILE

    @property
    def meta(self) -> Path:
        return self.dir / META_FILE

    @property
    def history(self) -> Path:
        return self.dir / HISTORY_FILE

    @property
    def turn_events(self) -> Path:
        """``turn-events.log``: the last turn's events (not a view: nothing checks it)."""
        return self.dir / TURN_EVENTS_FILE

    def turn_dir(self, message_id: str) -> Path:
        """``{messageId}/``: the folder of one turn."""
        return self.dir / check_id(message_id, "message")

    def turn_log(self, message_id: str) -> Path:
        """``{messageId}/messages.log``."""
        return self.turn_dir(message_id) / TURN_LOG_FILE

    def calls(self, message_id: str) -> Path:
        """``{messageId}/calls.jsonl``: the turn's model calls."""
        return self.turn_dir(message_id) / CALLS_FILE


@dataclass(frozen=True, slots=True)
class AgentPaths:
    """The files of one agent folder."""

    dir: Path

    @property
    def config(self) -> Path:
        return self.dir / _CONFIG

    @property
    def prompts_dir(self) -> Path:
        return self.dir / _PROMPTS

    def prompt(self, name: str) -> Path:
        """``prompts/{name}.md``: the agent's override of prompt template *name*."""
        return self.prompts_dir / f"{name}.md"

    @property
    def workspace(self) -> Path:
        return self.dir / _WORKSPACE

    @property
    def conversations_dir(self) -> Path:
        return self.dir / _CONVERSATIONS

    def conversation(self, conversation_id: str) -> ConversationPaths:
        checked = check_id(conversation_id, "conversation")
        return ConversationPaths(self.conversations_dir / checked)

    def lock_file(self, conversation_id: str) -> Path:
        """``conversations/.{conversationId}.lock``: the conversation's writer lock."""
        return self.conversations_dir / f".{check_id(conversation_id, 'conversation')}.lock"

    @property
    def data_root(self) -> DataLayout:
        """The data root this agent folder lives under."""
        return DataLayout(self.dir.parent.parent)


@dataclass(frozen=True, slots=True)
class DataLayout:
    """The layout under one data root."""

    root: Path

    @property
    def agents_dir(self) -> Path:
        return self.root / _AGENTS

    @property
    def config_db(self) -> Path:
        """``agentkit.db``: the ``system_config`` store (memory records)."""
        return self.root / CONFIG_DB

    def agent(self, agent_id: str) -> AgentPaths:
        return AgentPaths(self.agents_dir / check_id(agent_id, "agent"))

    def conversation(self, key: _Key) -> ConversationPaths:
        """The folder of conversation *key* (anything with ``agent_id``/``conversation_id``)."""
        return self.agent(key.agent_id).conversation(key.conversation_id)
