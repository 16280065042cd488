"""Simulated users: a script or a model plays the user; the agent's flow decides what is asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.errors import ConfigError, UsageError
from agentkit.eval import load_scenario, plan_runs, run_eval
from agentkit.eval.simulator import MOVE_SCHEMA, PROMPT_NAME

from .test_eval_runs import SCENARIOS, row, scenario

TRADER = "desk_sim_create_trader_en"
REFUSAL = "desk_sim_refuse_write_zh"


def test_a_scripted_user_goes_through_the_question_and_the_consent(data_dir: Path) -> None:
    frame = run_eval([scenario(TRADER)], model="scripted", data_dir=data_dir, progress=False)
    got = row(frame, TRADER)
    assert got["passed"] is True and got["outcome"] == "passed", got["failures"]
    assert (got["sim_turns"], got["sim_stopped_by"]) == (3, "user_done")
    assert got["user_model"] == "scripted"
    assert (got["questions"], got["consents"], got["turns"]) == (1, 1, 3)
    assert got["tools"] == "get_exchange_configs,create_trader"
    assert got["sim_model_calls"] == 0 and got["sim_tokens"] == 0 and got["model_calls"] == 5


def test_a_user_who_rejects_consent_never_gets_the_write(data_dir: Path) -> None:
    frame = run_eval([scenario(REFUSAL)], model="scripted", data_dir=data_dir, progress=False)
    got = row(frame, REFUSAL)
    assert got["passed"] is True, got["failures"]
    assert got["exp_tools_not_called"] is True and got["exp_consent_for"] is True
    assert "create_trader" not in str(got["tools"])


def test_max_turns_stops_a_user_who_would_go_on(data_dir: Path) -> None:
    base = scenario(TRADER)
    assert base.simulated_user is not None
    short = base.model_copy(
        update={"simulated_user": base.simulated_user.model_copy(update={"max_turns": 2})}
    )
    got = row(run_eval([short], model="scripted", data_dir=data_dir, progress=False), TRADER)
    assert (got["sim_turns"], got["sim_stopped_by"]) == (2, "max_turns")
    assert got["passed"] is False and got["final_status"] == "waiting_confirmation"
    assert "run: state FAILED" in str(got["failures"])


class OnlyWhatIsAsked:
    """A simulated user that answers the agent's question with the one fact it asks for."""

    def __init__(self, knows: dict[str, str]) -> None:
        self.knows = knows
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> object:
        self.requests.append(request)
        assert request.purpose == "chat" and request.json_schema == MOVE_SCHEMA
        asked = request.prompt.casefold()  # the agent's last message (roles are swapped)
        if "called" in asked:
            return {"action": "say", "message": self.knows["trader_name"]}
        if "ready" in asked:
            return {"action": "done", "message": ""}
        if "start" in asked:  # no opening: the simulator writes the first message
            return {"action": "say", "message": "I need a new trader on binance"}
        return {"action": "give_up", "message": f"I do not know what to say to {asked!r}"}


def test_a_model_plays_the_user_and_answers_only_what_it_is_asked(data_dir: Path) -> None:
    base = scenario(TRADER)
    assert base.simulated_user is not None
    user = OnlyWhatIsAsked({"trader_name": "Alpha", "exchange": "binance"})
    model = FunctionModel(user, name="simulated_user")
    frame = run_eval([base], model="scripted", user_model=model, data_dir=data_dir, progress=False)
    got = row(frame, TRADER)
    assert got["passed"] is True, got["failures"]
    assert (got["sim_turns"], got["sim_stopped_by"]) == (3, "user_done")
    assert got["user_model"] == "function:simulated_user" and got["sim_model_calls"] == 2
    # the opening is the scenario's and consent is answered in code ("yes"): two model calls,
    # after the question (the name, and nothing else) and after the answer (done)
    first, last = user.requests
    assert "What should the trader be called?" in first.prompt
    system = first.messages[0]
    assert system.role == "system"
    for text in ("A busy trader", "Have a trader called Alpha", "trader_name: Alpha", "English"):
        assert text in system.content
    assert [m.role for m in first.messages[1:]] == ["assistant", "user"]  # swapped roles
    assert first.messages[1].content == base.simulated_user.opening
    assert [m.content for m in last.messages if m.role == "assistant"][-1] == "yes"
    assert "Alpha is ready" in last.prompt


def test_without_an_opening_the_simulator_writes_the_first_message_from_the_agents_template(
    data_dir: Path,
) -> None:
    override = data_dir / "agents" / "desk-001" / "prompts" / f"{PROMPT_NAME}.md"
    override.parent.mkdir(exist_ok=True)
    override.write_text("You are $persona. You want: $goal.\n", encoding="utf-8")
    base = scenario(TRADER)
    assert base.simulated_user is not None
    quiet = base.model_copy(
        update={
            "simulated_user": base.simulated_user.model_copy(update={"opening": None}),
            "user_script": (),
        }
    )
    user = OnlyWhatIsAsked({"trader_name": "Alpha"})
    frame = run_eval(
        [quiet],
        model="scripted",
        user_model=FunctionModel(user),
        data_dir=data_dir,
        progress=False,
    )
    assert row(frame, TRADER)["passed"] is True
    assert len(user.requests) == 3  # the opening, the name, done
    assert user.requests[0].messages[0].content == (
        "You are A busy trader who answers briefly and only what is asked.. "
        "You want: Have a trader called Alpha on my binance account.."
    )


def test_a_model_user_refuses_consent_in_code_and_a_broken_simulator_is_an_error(
    data_dir: Path,
) -> None:
    base = scenario(REFUSAL)
    replies = iter([{"action": "say", "message": "稳健一号"}, {"action": "done", "message": ""}])
    model = FunctionModel(lambda request: next(replies))
    got = row(
        run_eval([base], model="scripted", user_model=model, data_dir=data_dir, progress=False),
        REFUSAL,
    )
    assert got["passed"] is True and got["sim_stopped_by"] == "user_done"
    assert got["sim_model_calls"] == 2  # the consent ("不要") cost no call
    broken = FunctionModel(lambda request: "not json at all")
    got = row(
        run_eval([base], model="scripted", user_model=broken, data_dir=data_dir, progress=False),
        REFUSAL,
    )
    assert got["outcome"] == "error" and got["sim_stopped_by"] == "error"
    assert str(got["error"]).startswith("the simulated user failed:")
    assert got["sim_model_calls"] == 2  # the call and its one repair round


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"turns": [{"user": "hi", "script": {"respond": ["hi"]}}]}, "turns", "not both"),
        ({"simulated_user": None}, "user_script", "needs a simulated_user"),
        ({"user_script": ["hello there"]}, "user_script", "the opening message"),
        ({"simulated_user": {"persona": "x", "goal": "y", "consent": "maybe"}},
         "simulated_user.consent", "approve"),
    ],
    ids=["turns-and-user", "script-without-user", "opening-mismatch", "bad-consent"],
)  # fmt: skip
def test_a_bad_simulated_user_is_an_error_naming_the_field(
    tmp_path: Path, change: dict[str, object], field: str, message: str
) -> None:
    data = load_scenario(SCENARIOS / f"{TRADER}.yaml").model_dump(mode="json", exclude={"id"})
    data.update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}), "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert caught.value.field == field and message in str(caught.value)


def test_a_simulated_scenario_that_cannot_run_is_found_before_any_run(data_dir: Path) -> None:
    base = scenario(TRADER)
    without = base.model_copy(update={"user_script": ()})
    with pytest.raises(UsageError, match="no user_script: its simulated user needs --user-model"):
        plan_runs([without], model="scripted", data_dir=data_dir)
    assert plan_runs([without], model="scripted", user_model="llama", data_dir=data_dir)
    with pytest.raises(UsageError, match="unknown backend"):
        plan_runs([base], model="scripted", user_model="gpt-5", data_dir=data_dir)
    unscripted = base.model_copy(update={"script": None})
    with pytest.raises(UsageError, match="no script for the agent's replies"):
        plan_runs([unscripted], model="scripted", data_dir=data_dir)
    (task,) = plan_runs([unscripted], model="llama", data_dir=data_dir)
    assert task.user_model == "llama"  # by default the run's model plays the user
