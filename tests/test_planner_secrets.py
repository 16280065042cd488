"""Secrets in planned steps: the ExecutionState holds masked arguments only; the real values
live in a separate ``step_secrets`` record until the flow ends, and a tool still runs with
them after consent — also in a new process."""

from __future__ import annotations

import json
from pathlib import Path

from agentkit import Agent, tool
from agentkit.calls.secrets import mask_value
from agentkit.events import AskUserEvent, ErrorEvent, ResultEvent
from agentkit.memory import MemoryRepository
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import TurnContext
from agentkit.planning.state import UserMessage
from agentkit.store import InMemoryConfigStore, InMemoryConversationStore, SqliteConfigStore
from agentkit.tools import ToolRegistry
from agentkit_desk import open_desk

from .test_planner import KEY, Env, env, of, run, step

__all__ = ["env"]

API_KEY, SECRET_KEY = "AK-VERY-SECRET-0001", "SK-VERY-SECRET-0002"
ARGS = {"exchange": "okx", "account_name": "main", "api_key": API_KEY, "secret_key": SECRET_KEY}
ASK = {
    "plan": [
        {
            "goal": "connect okx",
            "steps": [step("q", "ask_user", instruction="What are your API key and secret?")],
        }
    ]
}
PLAN = {
    "plan": [
        {
            "goal": "g",
            "steps": [step("c", "tool", tool_name="create_exchange_config", tool_args=ARGS)],
        }
    ]
}
CREATE = {
    "replan": [
        {
            "action": "replace_remaining",
            "steps": [step("c", "tool", tool_name="create_exchange_config", tool_args=ARGS)],
        }
    ]
}


def stored_values(env: Env) -> str:
    """Everything the config store holds but the step_secrets record, as one text."""
    return json.dumps(
        {
            key: env.kv.get(key).value  # type: ignore[union-attr]
            for key in env.kv.keys("")
            if not key.startswith("step_secrets:")
        }
    )


def test_secrets_stay_out_of_the_execution_state_and_the_tool_gets_them(env: Env) -> None:
    run(env.turn("connect my okx account main", ASK))
    events = run(env.turn(f"key {API_KEY} secret {SECRET_KEY}", CREATE))
    assert of(events, AskUserEvent)[0].kind == "confirmation"
    text = stored_values(env)
    assert API_KEY not in text and SECRET_KEY not in text  # not even the user's answer
    state = env.state()
    assert state is not None and state.step("c").tool_args["api_key"] == "****0001"
    secrets = env.memory.load_step_secrets(KEY.agent_id, KEY.conversation_id)
    assert secrets == {"c": ARGS}

    run(env.turn("yes", {"replan": [{"action": "finish"}], "respond": ["Connected."]}))
    [account] = env.db.exchange_configs()
    assert (account.api_key, account.secret_key) == (API_KEY, SECRET_KEY)  # the real values ran
    assert env.memory.load_step_secrets(KEY.agent_id, KEY.conversation_id) == {}  # flow over
    assert not [key for key in env.kv.keys("") if key.startswith("step_secrets:")]


def test_lost_secrets_fail_the_step_instead_of_storing_masks(env: Env) -> None:
    run(env.turn("add okx", PLAN))
    env.memory.save_step_secrets(KEY.agent_id, KEY.conversation_id, {})  # e.g. a restored backup
    events = run(env.turn("yes", {}))
    error = of(events, ErrorEvent)[0]
    assert error.code == "secrets_unavailable" and "give them again" in error.message
    assert env.db.exchange_configs() == []  # "****0001" was never stored as a key
    assert env.state().status == "failed"  # type: ignore[union-attr]


def test_clear_forgets_pending_secrets(env: Env) -> None:
    run(env.turn("add okx", PLAN))
    assert env.memory.load_step_secrets(KEY.agent_id, KEY.conversation_id)
    run(env.turn("/clear", {}))
    assert env.memory.load_step_secrets(KEY.agent_id, KEY.conversation_id) == {}


def test_consent_after_a_restart_uses_the_stored_secrets(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(PLAN)) as agent:
        said = f"add my okx account main: key {API_KEY} secret {SECRET_KEY}"
        conversation = agent.send(said).conversation_id
    with SqliteConfigStore(data_dir / "agentkit.db") as kv:
        state = MemoryRepository(kv).load_execution_state("desk-001", conversation)
        assert state is not None and API_KEY not in state.value.model_dump_json()
    finish = {"replan": [{"action": "finish"}], "respond": ["Connected."]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(finish)) as agent:
        assert agent.send("yes", conversation).text == "Connected."
    with open_desk(data_dir / "agents" / "desk-001" / "workspace") as desk:
        assert [account.api_key for account in desk.exchange_configs()] == [API_KEY]


def test_a_secret_a_tool_stores_mid_turn_is_scrubbed_from_that_turns_answer() -> None:
    """The domain's secrets are read once per turn and again after each tool call: the token
    a tool stores after the turn has already scrubbed its prompts is unknown at the turn's
    start, yet the answer that repeats it is scrubbed."""
    vault: list[str] = []
    token = "TOKEN-MINTED-MID-TURN-42"

    @tool
    def mint_token() -> str:
        """Make a new access token and keep it."""
        vault.append(token)
        return "a token was made"

    tools = ToolRegistry([mint_token.bind()], secrets=lambda: list(vault))
    store, kv = InMemoryConversationStore(), InMemoryConfigStore()
    store.create(KEY, "t")
    script = {
        "plan": [{"goal": "g", "steps": [step("m", "tool", tool_name="mint_token", tool_args={}),
                                          step("r", "respond")]}],
        "respond": [f"Your token is {token}."],
    }  # fmt: skip
    turn = TurnContext(
        key=KEY, input=UserMessage("make me a token"), store=store, memory=MemoryRepository(kv),
        model=ScriptedModel(script), tools=tools,
    )  # fmt: skip
    events = run(turn)
    assert vault == [token]  # the tool ran during this turn
    [result] = [event for event in events if isinstance(event, ResultEvent)]
    assert result.status == "completed"
    assert token not in result.text and mask_value(token) in result.text, result.text
