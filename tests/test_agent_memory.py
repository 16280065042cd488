"""The Agent's memory surface: what the workbench and the HTTP API read and edit."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentkit import (
    Agent,
    ConversationNotFoundError,
    InvalidIdError,
    ScriptedModel,
    TaskState,
    VersionConflictError,
)
from agentkit.store import InMemoryConfigStore

ASK = {
    "plan": [
        {
            "goal": "create a trader",
            "steps": [
                {
                    "id": "s1",
                    "type": "ask_user",
                    "title": "ask",
                    "instruction": "Which exchange account?",
                }
            ],
        }
    ]
}


def test_execution_state_and_task_state_are_readable_after_a_turn(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(ASK)) as agent:
        conversation = agent.send("create a trader").conversation_id
        loaded = agent.execution_state(conversation)
        assert loaded is not None
        assert loaded.value.status == "waiting_user"
        assert loaded.value.waiting is not None
        assert loaded.value.waiting.question == "Which exchange account?"
        task = agent.task_state(conversation)
        assert task.version == 0  # nothing summarised yet
    # Another Agent object on the same data root sees the same records (agentkit.db).
    with Agent.open("desk-001", data_dir=data_dir) as again:
        reread = again.execution_state(conversation)
        assert reread is not None and reread.value.status == "waiting_user"


def test_task_state_edit_is_a_versioned_write(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir, config_store=InMemoryConfigStore()) as agent:
        conversation = agent.create_conversation().conversation_id
        first = agent.save_task_state(
            conversation, TaskState(current_goal="set up a trader"), expected_version=0
        )
        assert first.version == 1
        second = agent.save_task_state(
            conversation,
            first.value.model_copy(update={"pinned_facts": ["budget is 100 USDT"]}),
            expected_version=first.version,
        )
        with pytest.raises(VersionConflictError):  # a stale editor loses, nothing is written
            agent.save_task_state(conversation, TaskState(), expected_version=first.version)
        stored = agent.task_state(conversation)
        assert stored.version == second.version
        assert stored.value.pinned_facts == ("budget is 100 USDT",)
        agent.clear_memory(conversation)
        assert agent.task_state(conversation).version == 0
        assert agent.execution_state(conversation) is None


def test_memory_of_unknown_or_hostile_conversation_is_refused(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir, config_store=InMemoryConfigStore()) as agent:
        with pytest.raises(ConversationNotFoundError):
            agent.task_state("conv-missing")
        with pytest.raises(InvalidIdError):
            agent.execution_state("../etc")
        with pytest.raises(ConversationNotFoundError):
            agent.save_task_state("conv-missing", TaskState(), expected_version=0)
    assert not (data_dir / "agentkit.db").exists()
