"""The desk example toolset (``agentkit_desk``): SQLite-backed configs and traders, reference
checks, masked secrets, and its state for evaluation (snapshot, seed)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentkit.agent_folder import AgentFolder
from agentkit.config import load_agent_config
from agentkit.errors import StoreError
from agentkit.tools import (
    AgentTools,
    ToolArgumentsError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
    run_tool,
)
from agentkit_desk import DeskDatabase, DeskToolset, desk_tools, open_desk, run_desk_tool

from tests.conftest import SAMPLE_AGENTS, tree

MODEL_KEY = "sk-model-key-0123456789ABCD"
EXCHANGE_KEY = "ex-api-key-ZZZZ-111122223333"
EXCHANGE_SECRET = "ex-secret-key-YYYY-444455556666"
SECRETS = (MODEL_KEY, EXCHANGE_KEY, EXCHANGE_SECRET)

READS = {"get_model_configs", "get_exchange_configs", "list_traders", "get_preferences"}
WRITES = {
    "create_model_config",
    "create_exchange_config",
    "create_trader",
    "update_trader",
    "delete_trader",
    "set_preference",
}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DeskDatabase]:
    with open_desk(tmp_path / "workspace") as database:
        yield database


@pytest.fixture
def tools(db: DeskDatabase) -> ToolRegistry:
    return desk_tools(db)


def ok(result: ToolResult) -> dict[str, object]:
    assert result.ok, result.error
    assert isinstance(result.output, dict)
    return result.output


def seed(tools: ToolRegistry) -> tuple[str, str]:
    """One model config and one exchange account; returns their ids."""
    model = ok(
        tools.run(
            "create_model_config",
            {"provider": "deepseek", "model": "deepseek-chat", "api_key": MODEL_KEY},
        )
    )
    exchange = ok(
        tools.run(
            "create_exchange_config",
            {
                "exchange": "binance",
                "account_name": "main",
                "api_key": EXCHANGE_KEY,
                "secret_key": EXCHANGE_SECRET,
            },
        )
    )
    return str(model["id"]), str(exchange["id"])


def test_the_ten_tools_and_their_flags(tools: ToolRegistry) -> None:
    assert set(tools.names()) == READS | WRITES
    for name in READS:
        tool = tools.get(name)
        assert (tool.side_effect, tool.live_state) == (False, True), name
    for name in WRITES:
        tool = tools.get(name)
        assert (tool.side_effect, tool.live_state) == (True, False), name


def test_desk_001_allow_list_exists_in_desk_tools(tools: ToolRegistry) -> None:
    config = load_agent_config(SAMPLE_AGENTS / "desk-001" / "config.json")
    assert config.tools
    assert tools.subset(config.tools).names() == config.tools


def test_create_model_exchange_and_trader_end_to_end(tools: ToolRegistry) -> None:
    model_id, exchange_id = seed(tools)
    assert model_id == "model-1"
    assert exchange_id == "ex-1"
    trader = ok(
        tools.run("create_trader", {"name": "alpha", "exchange_id": "ex-1", "model_id": "model-1"})
    )
    assert trader["id"] == "trader-1"
    assert trader["exchange_id"] == "ex-1"
    assert trader["model_id"] == "model-1"
    listed = ok(tools.run("list_traders", {}))
    assert [t["name"] for t in listed["traders"]] == ["alpha"]  # type: ignore[attr-defined]
    models = ok(tools.run("get_model_configs", {}))["model_configs"]
    assert models[0]["api_key"] == "****ABCD"  # type: ignore[index]
    exchanges = ok(tools.run("get_exchange_configs", {}))["exchange_configs"]
    assert exchanges[0]["secret_key"] == "****6666"  # type: ignore[index]


def test_references_are_validated(tools: ToolRegistry) -> None:
    seed(tools)
    for args, needle in [
        ({"name": "a", "exchange_id": "ex-9", "model_id": "model-1"}, "ex-9"),
        ({"name": "a", "exchange_id": "ex-1", "model_id": "model-7"}, "model-7"),
        ({"name": "a", "exchange_id": "binance", "model_id": "model-1"}, "binance"),
    ]:
        result = tools.run("create_trader", args)
        assert not result.ok
        assert needle in (result.error or "")
    assert ok(tools.run("list_traders", {}))["traders"] == []


def test_duplicate_trader_names_are_refused(tools: ToolRegistry) -> None:
    seed(tools)
    args = {"name": "alpha", "exchange_id": "ex-1", "model_id": "model-1"}
    ok(tools.run("create_trader", args))
    again = tools.run("create_trader", {**args, "name": "Alpha"})
    assert not again.ok
    assert "already exists" in (again.error or "")


def test_update_and_delete(tools: ToolRegistry) -> None:
    seed(tools)
    second_model = ok(tools.run("create_model_config", {"provider": "qwen", "model": "qwen-max"}))
    assert second_model["api_key"] is None
    ok(tools.run("create_trader", {"name": "alpha", "exchange_id": "ex-1", "model_id": "model-1"}))
    ok(tools.run("create_trader", {"name": "beta", "exchange_id": "ex-1", "model_id": "model-1"}))

    updated = ok(tools.run("update_trader", {"trader_id": "trader-1", "model_id": "model-2"}))
    assert updated["model_id"] == "model-2"
    assert updated["name"] == "alpha"
    renamed = ok(tools.run("update_trader", {"trader_id": "trader-1", "name": "gamma"}))
    assert renamed["name"] == "gamma"
    assert renamed["model_id"] == "model-2"

    for args, needle in [
        ({"trader_id": "trader-9", "name": "x"}, "trader-9"),
        ({"trader_id": "trader-1", "exchange_id": "ex-5"}, "ex-5"),
        ({"trader_id": "trader-1", "name": "beta"}, "already exists"),
        ({"trader_id": "trader-1"}, "at least one"),
    ]:
        result = tools.run("update_trader", args)
        assert not result.ok
        assert needle in (result.error or "")

    deleted = ok(tools.run("delete_trader", {"trader_id": "trader-2"}))
    assert deleted["deleted"] is True
    again = tools.run("delete_trader", {"trader_id": "trader-2"})
    assert not again.ok
    assert "trader-2" in (again.error or "")

    traders = ok(tools.run("list_traders", {}))["traders"]
    assert [(t["id"], t["name"], t["model_id"]) for t in traders] == [  # type: ignore[attr-defined, index]
        ("trader-1", "gamma", "model-2")
    ]
    # ids are never reused
    assert (
        ok(
            tools.run(
                "create_trader", {"name": "delta", "exchange_id": "ex-1", "model_id": "model-1"}
            )
        )["id"]
        == "trader-3"
    )


def test_preferences_round_trip(tools: ToolRegistry) -> None:
    assert ok(tools.run("get_preferences", {})) == {"preferences": {}}
    ok(tools.run("set_preference", {"key": "risk", "value": {"max_leverage": 3}}))
    ok(tools.run("set_preference", {"key": "language", "value": "zh"}))
    ok(tools.run("set_preference", {"key": "language", "value": "en"}))
    assert ok(tools.run("get_preferences", {})) == {
        "preferences": {"language": "en", "risk": {"max_leverage": 3}}
    }


def test_invalid_arguments_are_usage_errors(tools: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        tools.run(
            "create_exchange_config", {"exchange": "okx", "account_name": "a", "api_key": "k" * 20}
        )
    assert caught.value.field == "secret_key"
    with pytest.raises(ToolArgumentsError):
        tools.run("list_traders", {"all": True})
    with pytest.raises(ToolArgumentsError) as blank:
        tools.run("create_trader", {"name": "  ", "exchange_id": "ex-1", "model_id": "model-1"})
    assert blank.value.field == "name"


def test_secrets_are_stored_but_never_shown(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    results: list[ToolResult] = []
    with open_desk(workspace) as db:
        tools = desk_tools(db)
        seed(tools)
        results.append(
            tools.run(
                "create_trader", {"name": "alpha", "exchange_id": "ex-1", "model_id": "model-1"}
            )
        )
        for name in sorted(READS):
            results.append(tools.run(name, {}))
        results.append(
            tools.run("create_model_config", {"provider": "p", "model": "m", "api_key": MODEL_KEY})
        )
        rendered = tools.render()
        assert db.secret_values() == set(SECRETS)

    shown = rendered + "".join(result.model_dump_json() for result in results)
    for secret in SECRETS:
        assert secret not in shown
        assert secret[4:-4] not in shown

    with sqlite3.connect(workspace / "desk.db") as connection:
        stored = connection.execute(
            "SELECT api_key FROM model_configs UNION ALL SELECT api_key || secret_key "
            "FROM exchange_configs"
        ).fetchall()
    connection.close()
    flat = "".join(str(value) for (value,) in stored)
    for secret in SECRETS:
        assert secret in flat


def test_reopening_sees_the_data_and_closed_db_refuses(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    with open_desk(workspace) as db:
        seed(desk_tools(db))
        ok(desk_tools(db).run("set_preference", {"key": "k", "value": [1, 2]}))
    assert (workspace / "desk.db").is_file()
    with open_desk(workspace) as db:
        tools = desk_tools(db)
        assert ok(tools.run("get_model_configs", {}))["model_configs"][0]["id"] == "model-1"  # type: ignore[index]
        assert ok(tools.run("get_preferences", {}))["preferences"] == {"k": [1, 2]}
        ok(tools.run("create_trader", {"name": "a", "exchange_id": "ex-1", "model_id": "model-1"}))
    with pytest.raises(StoreError):
        db.traders()
    with open_desk(workspace) as db:
        assert [trader.name for trader in db.traders()] == ["a"]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "desk.db"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version=99")
    connection.close()
    with DeskDatabase(path) as db, pytest.raises(StoreError, match="schema version 99"):
        db.traders()


def test_run_tool_for_the_cli(data_dir: Path) -> None:
    folder = AgentFolder.load(data_dir, "desk-001")
    workspace = folder.path / "workspace"
    before = tree(workspace)
    with pytest.raises(ToolArgumentsError):
        run_tool(folder, "create_model_config", '{"provider": "p"')
    with pytest.raises(ToolArgumentsError):
        run_tool(folder, "create_model_config", "[1]")
    with pytest.raises(ToolArgumentsError):
        run_tool(folder, "create_model_config", '{"provider": "p", "model": "m", "x": 1}')
    with pytest.raises(UnknownToolError):
        run_tool(folder, "execute_trade", "{}")
    assert tree(workspace) == before  # nothing was written

    created = run_tool(
        folder,
        "create_model_config",
        json.dumps({"provider": "p", "model": "m", "api_key": MODEL_KEY}),
    )
    assert created.ok
    assert MODEL_KEY not in created.text
    listed = run_tool(folder, "get_model_configs", "")
    assert json.loads(listed.text)["model_configs"][0]["id"] == "model-1"
    assert (workspace / "desk.db").is_file()
    # a workspace path gives every desk tool
    assert run_desk_tool(workspace, "list_traders", "{}").ok

    # an agent without toolsets has no tools
    other = AgentFolder.load(data_dir, "innovator-001")
    with pytest.raises(UnknownToolError, match=r"known tools: \(none\)"):
        run_tool(other, "list_traders", "{}")


def test_the_file_is_wal_with_foreign_keys(tmp_path: Path) -> None:
    with open_desk(tmp_path) as db:
        seed(desk_tools(db))
    connection = sqlite3.connect(tmp_path / "desk.db")
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        connection.execute("PRAGMA foreign_keys=ON")
        with pytest.raises(sqlite3.IntegrityError):
            connection.execute(
                "INSERT INTO traders (name, exchange_id, model_id, created_at, updated_at) "
                "VALUES ('x', 42, 1, '', '')"
            )
    finally:
        connection.close()


def test_the_desk_toolset_seeds_snapshots_and_scrubs_its_secrets(tmp_path: Path) -> None:
    with DeskToolset(tmp_path) as toolset:
        assert toolset.name == "desk" and toolset.has_state
        toolset.seed(
            {
                "model_configs": [{"provider": "openai", "model": "gpt-4o", "api_key": MODEL_KEY}],
                "exchange_configs": [
                    {"exchange": "okx", "account_name": "main", "api_key": EXCHANGE_KEY,
                     "secret_key": EXCHANGE_SECRET}
                ],
                "traders": [{"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"}],
                "preferences": {"language": "zh"},
            }
        )  # fmt: skip
        assert toolset.snapshot() == {
            "traders": ["Alpha"],
            "trader_count": 1,
            "model_config_count": 1,
            "exchange_config_count": 1,
            "preferences": {"language": "zh"},
            "trader_fields": {
                "Alpha": {"id": "trader-1", "exchange_id": "ex-1", "model_id": "model-1"}
            },
        }
        assert set(toolset.secrets()) == set(SECRETS)
        with pytest.raises(ValueError, match="extra"):
            toolset.seed({"traders": [{"name": "B", "exchange_id": "ex-1", "model_id": "m",
                                       "colour": "red"}]})  # fmt: skip


def test_an_agent_registry_scrubs_the_desks_secrets(data_dir: Path) -> None:
    folder = AgentFolder.load(data_dir, "desk-001")
    with AgentTools.load(folder) as tools:
        tools.seed({"desk": {"model_configs": [{"provider": "p", "model": "m",
                                                "api_key": MODEL_KEY}]}})  # fmt: skip
        assert tools.registry.secrets is not None
        assert MODEL_KEY in set(tools.registry.secrets())
        echoed = tools.registry.run("set_preference", {"key": "note", "value": MODEL_KEY})
        assert MODEL_KEY not in echoed.text
