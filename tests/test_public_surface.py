"""The public surface is deliberate, and importing agentkit stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import agentkit
import pytest


def test_all_is_sorted_and_pinned() -> None:
    assert agentkit.__all__ == sorted(agentkit.__all__)
    assert set(agentkit.__all__) == {
        "Agent",
        "AgentConfig",
        "AgentEvent",
        "AgentFolder",
        "AgentNotFoundError",
        "AgentkitError",
        "ChatModel",
        "CompressionConfig",
        "ConfigError",
        "Conversation",
        "ConversationBusyError",
        "ConversationKey",
        "ConversationMeta",
        "ConversationNotFoundError",
        "ConversationStats",
        "ConversationStore",
        "CorruptJournalError",
        "ExecutionState",
        "FileConversationStore",
        "ForkOrigin",
        "InMemoryConversationStore",
        "InvalidIdError",
        "Message",
        "ModelError",
        "ModelSpecError",
        "PlannerConfig",
        "ScriptedModel",
        "SessionBackend",
        "SessionModel",
        "SessionPool",
        "StoreError",
        "StructuredOutputError",
        "TaskState",
        "ToolCallRecord",
        "TurnNotFinishedError",
        "TurnNotFoundError",
        "TurnResult",
        "UsageError",
        "VerifyReport",
        "VersionConflictError",
        "Versioned",
        "create_model",
        "list_agent_ids",
        "new_conversation_id",
        "new_message_id",
        "replay",
        "resolve_data_dir",
        "tool",
    }
    for name in agentkit.__all__:
        assert hasattr(agentkit, name), name


def test_import_agentkit_loads_no_ui_web_or_dataframe_library() -> None:
    code = (
        "import json, sys; import agentkit; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code])))
    forbidden = {"ipywidgets", "IPython", "jupyter_client", "jupyterlab", "fastapi", "starlette"}
    forbidden |= {"pandas", "typer", "rich", "uvicorn", "llama_cpp", "httpx", "acp", "jsonschema"}
    assert loaded & forbidden == set()
    assert "agentkit" in loaded


def test_errors_form_one_tree() -> None:
    for name in agentkit.__all__:
        value = getattr(agentkit, name)
        if isinstance(value, type) and name.endswith("Error") and name != "AgentkitError":
            assert issubclass(value, agentkit.AgentkitError), name
    assert issubclass(agentkit.InvalidIdError, agentkit.UsageError)
    assert issubclass(agentkit.CorruptJournalError, agentkit.StoreError)


def test_import_agentkit_is_lazy_and_every_public_name_resolves() -> None:
    """``import agentkit`` builds no pydantic model (names load on first use, PEP 562); the
    lazy table names a home for everything in ``__all__``, and the objects are the same as
    their modules' own."""
    code = (
        "import json, sys; import agentkit; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code])))
    assert "pydantic" not in loaded and "sqlite3" not in loaded
    import importlib

    for name in agentkit.__all__:
        home = agentkit._HOMES[name]  # the lazy table is what this test pins
        assert getattr(agentkit, name) is getattr(importlib.import_module(home), name)
    assert "Agent" in dir(agentkit)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = agentkit.Nope  # type: ignore[attr-defined]
