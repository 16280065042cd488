"""Choosing the store (``--store``, ``$AGENTKIT_STORE``, ``Agent.open(store=…)``) without a
server: the default is unchanged, a bad spec or a missing extra is one line and exit 2."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from agentkit import Agent, MissingExtraError, UsageError
from agentkit.store import FileConversationStore
from agentkit.store.choice import FILES, STORE_ENV, open_stores, resolve_store_spec

from tests.conftest import run_cli


def test_without_a_spec_nothing_changes(data_dir: Path) -> None:
    assert resolve_store_spec(None) == FILES
    assert resolve_store_spec("file") == FILES
    opened = open_stores(None, data_dir)
    assert isinstance(opened.conversations, FileConversationStore)
    assert opened.config is None and opened.events is None and opened.is_files
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        assert isinstance(agent.store, FileConversationStore)


def test_the_environment_names_the_store_and_an_argument_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STORE_ENV, "postgresql://db/agentkit")
    assert resolve_store_spec(None) == "postgresql://db/agentkit"
    assert resolve_store_spec("postgres://other/x") == "postgres://other/x"
    assert resolve_store_spec(FILES) == FILES


@pytest.mark.parametrize("spec", ["redis://x", "sqlite:agentkit.db", "mongodb://y"])
def test_an_unknown_store_is_a_usage_error(spec: str, data_dir: Path) -> None:
    with pytest.raises(UsageError, match="unknown store"):
        resolve_store_spec(spec)
    result = run_cli("--data-dir", str(data_dir), "verify", "--store", spec)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "unknown store" in result.stderr


def test_a_missing_postgres_extra_names_the_pip_command(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        hidden = name.partition(".")[0] in ("psycopg", "psycopg_pool")
        return None if hidden else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr("agentkit._extras.importlib.util.find_spec", find_spec)
    with pytest.raises(MissingExtraError) as caught:
        open_stores("postgresql://db/agentkit", data_dir)
    assert caught.value.extra == "postgres"
    for args in (
        ("send", "innovator-001", "hi", "--store", "postgresql://db/x"),
        ("db", "upgrade", "--store", "postgresql://db/x"),
    ):
        result = run_cli("--data-dir", str(data_dir), *args)
        assert result.exit_code == 2, result
        assert result.stderr.count("\n") == 1
        assert "pip install 'agentkit[postgres]'" in result.stderr
