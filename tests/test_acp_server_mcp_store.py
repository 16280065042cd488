"""An ACP session with the client's MCP servers keeps its memory in the configured store.

The session's prompts run on an agent of their own (the served agent plus the servers'
tools, agentkit.acp_server.client_tools); its TaskState and ExecutionState belong in the
config store ``agentkit acp --store`` names (here: PostgreSQL, a real server), as the served
agent's do, never in an ``agentkit.db`` the session agent would open under the data root.
A real ``agentkit acp`` subprocess, a real MCP server (``mcp-server-time``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests._acp_peer import serve
from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)
from tests.test_acp_server_mcp import TIME_SERVER, make_agent, time_plan, time_server

pytest.importorskip("mcp")
pytest.importorskip("psycopg")

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not TIME_SERVER.is_file(), reason="mcp-server-time is installed by the dev extra"
    ),
]


def test_a_session_with_client_mcp_servers_keeps_its_memory_in_the_configured_store(
    data_dir: Path,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    import acp
    from agentkit.memory.repository import MemoryRepository
    from agentkit.store.postgres_kv import PostgresConfigStore

    make_agent(data_dir, "clock", [])

    async def body() -> str:
        args = ("--model", time_plan(tmp_path), "--store", postgres_url)
        async with serve(data_dir, "clock", *args) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            new = await served.conn.new_session(cwd=str(tmp_path), mcp_servers=[time_server()])
            response = await served.prompt(new.session_id, "What time is it in Shanghai?")
            assert response.field_meta["agentkit"]["turns"][0]["status"] == "completed"
            return new.session_id

    sid = asyncio.run(body())
    with PostgresConfigStore(postgres_url) as config:
        state = config.get(MemoryRepository.execution_state_key("clock", sid))
        assert state is not None, config.keys("")
        assert isinstance(state.value, dict) and state.value["goal"] == "tell the time"
    assert not (data_dir / "agentkit.db").exists()
