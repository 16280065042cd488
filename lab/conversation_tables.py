"""A data root as pandas tables: agents → conversations → messages and turns.

Plain functions over agentkit's public API (``list_agent_ids``, ``Agent.list_conversations``,
``load_conversation_history``, ``turn_log``), so the conversation browser is a thin view and
each table is tested directly. Tables have fixed columns, also when empty, so code built on
them (a notebook cell, a filter) does not break on a fresh data root. Reading never writes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from agentkit import Agent, AgentFolder, list_agent_ids, resolve_data_dir

__all__ = [
    "AGENT_COLUMNS",
    "CONVERSATION_COLUMNS",
    "MESSAGE_COLUMNS",
    "TURN_COLUMNS",
    "agents_frame",
    "conversations_frame",
    "messages_frame",
    "turns_frame",
]

AGENT_COLUMNS = ("agentId", "name", "engine", "model", "description")
CONVERSATION_COLUMNS = (
    "conversationId",
    "title",
    "status",
    "messages",
    "inputTokens",
    "outputTokens",
    "createdAt",
    "updatedAt",
)
MESSAGE_COLUMNS = ("messageId", "role", "content", "timestamp", "toolCalls", "outputTokens")
TURN_COLUMNS = (
    "messageId",
    "startedAt",
    "user",
    "reply",
    "inputTokens",
    "outputTokens",
    "logLines",
)


def agents_frame(data_dir: Path | str | None = None) -> pd.DataFrame:
    """One row per agent folder under the data root (``$AGENTKIT_DATA_DIR`` by default)."""
    root = resolve_data_dir(data_dir)
    rows = []
    for agent_id in list_agent_ids(root):
        folder = AgentFolder.load(root, agent_id)
        config = folder.config
        rows.append(
            {
                "agentId": agent_id,
                "name": folder.name,
                "engine": config.engine,
                "model": config.model,
                "description": config.description,
            }
        )
    return pd.DataFrame(rows, columns=list(AGENT_COLUMNS))


def conversations_frame(agent: Agent) -> pd.DataFrame:
    """The agent's conversations, most recently updated first."""
    rows = [
        {
            "conversationId": meta.conversation_id,
            "title": meta.title,
            "status": meta.status,
            "messages": meta.stats.message_count,
            "inputTokens": meta.stats.input_tokens,
            "outputTokens": meta.stats.output_tokens,
            "createdAt": pd.Timestamp(meta.created_at),
            "updatedAt": pd.Timestamp(meta.updated_at),
        }
        for meta in agent.list_conversations()
    ]
    return pd.DataFrame(rows, columns=list(CONVERSATION_COLUMNS))


def messages_frame(agent: Agent, conversation_id: str) -> pd.DataFrame:
    """Every message of the conversation, oldest first (system markers included)."""
    rows = [
        {
            "messageId": message.message_id,
            "role": message.role,
            "content": message.content,
            "timestamp": pd.Timestamp(message.timestamp),
            "toolCalls": len(message.tool_calls),
            "outputTokens": message.usage.output_tokens if message.usage else 0,
        }
        for message in agent.load_conversation_history(conversation_id)
    ]
    return pd.DataFrame(rows, columns=list(MESSAGE_COLUMNS))


def turns_frame(agent: Agent, conversation_id: str) -> pd.DataFrame:
    """One row per turn (a user message and the reply sharing its id), with its log's size.

    A turn whose reply never came (failed before any text, or still running) has an empty
    ``reply``; ``logLines`` counts the lines of its ``messages.log``.
    """
    turns: dict[str, dict[str, object]] = {}
    for message in agent.load_conversation_history(conversation_id):
        if message.role == "user":
            turns[message.message_id] = {
                "messageId": message.message_id,
                "startedAt": pd.Timestamp(message.timestamp),
                "user": message.content,
                "reply": "",
                "inputTokens": 0,
                "outputTokens": 0,
            }
        elif message.role == "assistant" and message.message_id in turns:
            turn = turns[message.message_id]
            turn["reply"] = message.content
            if message.usage is not None:
                turn["inputTokens"] = message.usage.input_tokens
                turn["outputTokens"] = message.usage.output_tokens
    for message_id, turn in turns.items():
        log = agent.turn_log(conversation_id, message_id)
        turn["logLines"] = len(log.splitlines())
    return pd.DataFrame(list(turns.values()), columns=list(TURN_COLUMNS))
