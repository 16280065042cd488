"""BranchView: the branch tree and the comparison as plain functions, the widget's Fork and
Replay buttons clicked in plain pytest, and notebook 08 run by papermill."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lab
import papermill
import pytest
from agentkit import (
    Agent,
    ConversationMeta,
    ConversationNotFoundError,
    ForkOrigin,
    ScriptedModel,
)
from lab import BranchView
from lab.branch_view import (
    TREE_COLUMNS,
    branch_tree,
    comparison_frame,
    config_sets,
    shared_turns,
    tree_frame,
    turn_options,
)

from tests.conftest import tree

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def meta(
    cid: str, minute: int, parent: str | None = None, at: str | None = None
) -> ConversationMeta:
    origin = ForkOrigin(conversation_id=parent, message_id=at) if parent else None
    return ConversationMeta(
        conversation_id=cid,
        agent_id="a",
        title=f"title {cid}",
        created_at=T0 + timedelta(minutes=minute),
        updated_at=T0 + timedelta(minutes=minute),
        forked_from=origin,
    )


def facts(*turns: tuple[str, str, str], tools: str = "") -> list[dict[str, Any]]:
    """turn_facts-shaped dicts: (message_id, user, answer) per turn, 1 call, 10 tokens each."""
    return [
        {
            "message_id": mid,
            "user": user,
            "answer": answer,
            "status": "completed",
            "flow": "",
            "tools": [tools] if tools else [],
            "consent": "",
            "model_calls": 1,
            "tokens": 10,
            "model_ms": 1.0,
            "latency_ms": 5.0,
        }
        for mid, user, answer in turns
    ]


# -- plain functions -------------------------------------------------------------------------


def test_the_tree_is_found_from_any_branch_depth_first_oldest_sibling_first() -> None:
    metas = [
        meta("c-late", 5, "c-root", "m2"),
        meta("c-root", 0),
        meta("c-grand", 6, "c-early", "m1"),
        meta("c-early", 1, "c-root", "m1"),
        meta("c-other", 2),  # another tree
        meta("c-orphan", 3, "c-deleted", "m1"),  # its source is gone: a root of its own
    ]
    for start in ("c-root", "c-late", "c-grand"):
        nodes = branch_tree(metas, start)
        assert [(n.conversation_id, n.depth, n.parent, n.forked_at) for n in nodes] == [
            ("c-root", 0, None, None),
            ("c-early", 1, "c-root", "m1"),
            ("c-grand", 2, "c-early", "m1"),
            ("c-late", 1, "c-root", "m2"),
        ]
    assert [n.conversation_id for n in branch_tree(metas, "c-orphan")] == ["c-orphan"]
    assert branch_tree(metas, "c-orphan")[0].parent is None
    assert branch_tree(metas, "c-unknown") == []


def test_the_tree_table_counts_each_branchs_own_turns() -> None:
    metas = [meta("c-root", 0), meta("c-fork", 1, "c-root", "m2")]
    nodes = branch_tree(metas, "c-root")
    by_id = {
        "c-root": facts(("m1", "q1", "a1"), ("m2", "q2", "a2"), ("m3", "q3", "a3")),
        "c-fork": facts(("m1", "q1", "a1"), ("m2", "q2", "a2"), ("m9", "q3", "<b>B3</b>")),
    }
    frame = tree_frame(nodes, by_id)
    assert list(frame.columns) == list(TREE_COLUMNS)
    root, fork = frame.to_dict("records")
    assert root["forkedAtTurn"] == "" and root["turns"] == root["newTurns"] == 3
    assert root["modelCalls"] == 3 and root["tokens"] == 30 and root["latencyMs"] == 15.0
    assert fork["branch"].endswith("└─ title c-fork") and fork["forkedAtTurn"] == 2
    assert fork["turns"] == 3 and fork["newTurns"] == 1 and fork["tokens"] == 10
    assert fork["lastAnswer"] == "<b>B3</b>"


def test_the_comparison_starts_where_two_branches_part_and_numbers_turns_in_the_conversation() -> (
    None
):
    source = facts(("m1", "q1", "a1"), ("m2", "q2", "a2"), ("m3", "q3", "a3"))
    branch = facts(("m1", "q1", "a1"), ("m8", "q2", "B2"), ("m9", "q3", "a3"), tools="t({})")
    assert shared_turns(source, branch) == 1
    table = comparison_frame(source, branch)
    assert list(table["turn"]) == [2, 3]
    assert list(table["user"]) == ["q2", "q3"]
    assert list(table["original_answer"]) == ["a2", "a3"]
    assert list(table["branch_answer"]) == ["B2", "a3"]
    assert list(table["same_answer"]) == [False, True]
    assert list(table["branch_tools"]) == ["t({})", "t({})"]
    assert not table["same_tools"].any()
    fresh_fork = source[:2]  # forked at turn 2, nothing sent yet
    assert list(comparison_frame(source, fresh_fork)["branch_answer"]) == [""]
    assert comparison_frame(source, source).empty


def test_turn_choices_and_config_lines() -> None:
    options = turn_options(facts(("m1", "hello\n  there", "a"), ("m2", "x" * 60, "b")))
    assert [value for _, value in options] == [0, 1, 2]
    assert options[1][0] == "1 · hello there"
    assert options[2][0] == f"2 · {'x' * 48}…"
    text = "planner.strategy=next_step\n\n  # a comment\n compression.keep_recent=4 \n"
    assert config_sets(text) == ["planner.strategy=next_step", "compression.keep_recent=4"]


def test_lab_exports_the_view() -> None:
    assert "BranchView" in lab.__all__ and lab.__all__ == sorted(lab.__all__)


# -- the widget --------------------------------------------------------------------------------


def digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def chat(data_dir: Path, *texts: str) -> str:
    """A conversation of innovator-001 (chat engine): reply N to the Nth text."""
    script = {"chat": [f"reply {n}" for n in range(1, len(texts) + 1)]}
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        conversation = None
        for text in texts:
            conversation = agent.send(text, conversation).conversation_id
    assert conversation is not None
    return conversation


@pytest.fixture
def recorded(data_dir: Path) -> tuple[Path, str]:
    return data_dir, chat(data_dir, "first", "second <script>x</script>", "third")


def test_replay_from_the_widget_shows_the_branch_beside_its_source(
    recorded: tuple[Path, str],
) -> None:
    data_dir, source = recorded
    folder = data_dir / "agents" / "innovator-001" / "conversations" / source
    before = digest(folder)
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        model = ScriptedModel({"chat": ["B2", "B3"]}, name="branch")
        view = BranchView(agent, source, model=model)
        assert view.model.value == "scripted:branch" and view.replay_model() is model
        assert [n.conversation_id for n in view.nodes] == [source]
        assert view.comparison.empty and "fork or replay" in view.comparison_table.value
        assert view.turn_choice.value == 2  # by default the last turn is replayed
        view.turn_choice.value = 1
        view.fork_title.value = "other model"
        view.replay_button.click()

        table = view.last_replay
        assert table is not None
        branch = table.attrs["branch"]
        assert "error" not in view.notice.value and "2 answers differ" in view.notice.value
        assert [n.conversation_id for n in view.nodes] == [source, branch]
        assert view.branch_choice.value == branch and view.against_choice.value == source
        assert list(view.comparison["turn"]) == [2, 3]
        for column in ("user", "original_answer", "branch_answer", "same_answer"):
            assert list(view.comparison[column]) == list(table[column])
        assert list(table["branch_answer"]) == ["B2", "B3"]
        assert list(view.tree["forkedAtTurn"]) == ["", 1]
        assert list(view.tree["newTurns"]) == [3, 2]
        assert agent.get_conversation(branch).meta.title == "other model"
        shown = view.tree_table.value + view.comparison_table.value
        assert "<script>" not in shown and "&lt;script&gt;" in shown
        assert view.replay_button.disabled is False
    assert digest(folder) == before  # the source is only read


def test_replay_the_rest_with_the_views_defaults_replays_the_last_turn(
    recorded: tuple[Path, str],
) -> None:
    data_dir, source = recorded
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        view = BranchView(agent, source, model=ScriptedModel({"chat": ["B3"]}, name="b"))
        view.replay_button.click()  # nothing chosen: what a newcomer does first
        table = view.last_replay
        assert table is not None, view.notice.value
        assert "error" not in view.notice.value and "replayed 1 turns" in view.notice.value
        assert list(table["user"]) == ["third"] and list(table["branch_answer"]) == ["B3"]
        assert list(view.comparison["turn"]) == [3]
        # the new branch selected: its default is again its last turn but one
        assert view.turn_choice.value == 2
        # the tables scroll inside the view instead of running past its edge
        assert view.tree_table.layout.overflow == "auto"
        assert view.comparison_table.layout.width == "100%"


def test_fork_from_the_widget_then_compare_siblings(recorded: tuple[Path, str]) -> None:
    data_dir, source = recorded
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        view = BranchView(agent, source)
        assert view.model.value == "" and view.replay_model() is None  # config.json's model
        view.turn_choice.value = 2
        view.fork_button.click()
        (fork,) = [n for n in view.nodes if n.parent == source]
        assert "forked" in view.notice.value
        meta = agent.get_conversation(fork.conversation_id).meta
        assert meta.forked_from == ForkOrigin(
            conversation_id=source, message_id=view.facts[source][1]["message_id"]
        )
        assert view.branch_choice.value == fork.conversation_id
        assert list(view.comparison["turn"]) == [3]  # the source's turn the fork lacks
        assert list(view.comparison["branch_answer"]) == [""]

        # a fork of the fork: the tree grows a level; from there, compare with the source
        view.turn_choice.value = 1
        view.fork_button.click()
        grand = view.nodes[-1]
        assert (grand.depth, grand.parent) == (2, fork.conversation_id)
        assert list(view.tree["forkedAtTurn"]) == ["", 2, 1]
        view.select(grand.conversation_id, against=source)
        assert list(view.comparison["turn"]) == [2, 3]

        # a view opened on a fork shows the whole tree, compared with the fork's source
        other = BranchView(agent, grand.conversation_id)
        assert [n.conversation_id for n in other.nodes] == [n.conversation_id for n in view.nodes]
        assert other.against_choice.value == fork.conversation_id


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"turn": 3}, "nothing to replay after turn 3"),
        ({"turn": 1, "sets": "no_such_key=1"}, "no_such_key"),
        ({"turn": 1, "sets": "planner.max_steps=zero"}, "max_steps"),
        ({"turn": 1, "template": "plan", "edit": "$nope"}, "nope"),
        ({"turn": 1, "model": "nosuchbackend:x"}, "nosuchbackend"),
    ],
)
def test_a_replay_that_cannot_run_says_why_and_writes_nothing(
    recorded: tuple[Path, str], setup: dict[str, Any], message: str
) -> None:
    data_dir, source = recorded
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        view = BranchView(agent, source, model=ScriptedModel({"chat": ["B"]}))
        before = tree(data_dir)
        view.turn_choice.value = setup["turn"]
        view.sets.value = setup.get("sets", "")
        if "edit" in setup:
            view.template_name.value = setup["template"]
            view.editor.value += setup["edit"]
        if "model" in setup:
            view.model.value = setup["model"]
        view.replay_button.click()
        assert "agentkit-notice-error" in view.notice.value
        assert message in view.notice.value
        assert view.last_replay is None and len(view.nodes) == 1
        assert view.replay_button.disabled is False
        assert tree(data_dir) == before


def test_an_unknown_or_deleted_conversation(recorded: tuple[Path, str]) -> None:
    data_dir, source = recorded
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        with pytest.raises(ConversationNotFoundError):
            BranchView(agent, "conv-nosuchthing")
        view = BranchView(agent, source)
        agent.delete_conversation(source)
        view.refresh_button.click()
        assert view.nodes == [] and view.branch_choice.value is None
        assert "No such conversation." in view.tree_table.value


def test_a_fork_of_no_turns_is_refused(recorded: tuple[Path, str]) -> None:
    data_dir, source = recorded
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        view = BranchView(agent, source)
        before = tree(data_dir)
        view.turn_choice.value = 0
        view.fork_button.click()
        assert "at least one turn" in view.notice.value and tree(data_dir) == before


def test_an_edited_plan_prompt_reaches_the_branch_only(data_dir: Path) -> None:
    """A planner conversation (desk-001); the editor's text is the branch's plan template."""
    plan = {"goal": "answer", "steps": [{"id": "s1", "type": "respond", "title": "Answer"}]}
    script = {"plan": [plan], "respond": ["one", "two"]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as recorder:
        source = recorder.send("hello").conversation_id
        recorder.send("again", source)
    with Agent.open("desk-001", data_dir=data_dir) as agent:
        view = BranchView(agent, source, model=ScriptedModel({**script, "respond": ["TWO"]}))
        assert view.template_name.value == "plan"
        view.editor.value = "EDITED PLAN PROMPT.\n" + view.editor.value
        view.turn_choice.value = 1
        table = view.replay()
        branch = table.attrs["branch"]
        assert list(view.comparison["branch_answer"]) == ["TWO"]
        traces = "".join(
            p.read_text() for p in agent.call_records_dir(branch).glob("*/calls.jsonl")
        )
        assert traces.count("EDITED PLAN PROMPT.") == 1  # the replayed turn's plan call
        sources = "".join(
            p.read_text() for p in agent.call_records_dir(source).glob("*/calls.jsonl")
        )
        assert "EDITED PLAN PROMPT." not in sources
    assert not (data_dir / "agents" / "desk-001" / "prompts" / "plan.md").exists()


# -- notebook 08 ---------------------------------------------------------------------------------


def test_branches_notebook_forks_replays_and_compares(data_dir: Path, tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "08_branches.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={"data_dir": str(data_dir), "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    source = summary["conversation_id"]
    assert len(summary["turns"]) == 4
    fork = summary["fork"]
    assert fork["forked_from"]["conversationId"] == source
    assert fork["status"] == "completed" and len(fork["history"]) == 6  # 2 kept turns + 1 new
    replay = summary["replay"]
    assert [row["user"] for row in replay["rows"]] == summary["turns"][2:]
    assert not any(row["same_answer"] for row in replay["rows"])
    assert replay["rows"][0]["branch_tools"] == "list_traders({}); get_model_configs({})"
    assert replay["edited_prompt_sent"] and replay["original_prompt_kept"]
    widget = summary["widget"]
    assert "error" not in widget["notice"] and widget["comparison_rows"] == 2
    assert [row["branch_answer"] for row in widget["rows"]] == [
        "Batch by batch: no traders.",
        "Batch by batch: connect an exchange first.",
    ]
    ids = [row["conversationId"] for row in summary["tree"]]
    assert ids == [source, fork["conversation_id"], replay["branch"], widget["branch"]]
    assert [row["forkedAtTurn"] for row in summary["tree"]] == ["", 2, 2, 2]
    assert [row["newTurns"] for row in summary["tree"]] == [4, 1, 2, 2]
    # the notebook's replays used copies: the sample agent's prompts and config are unchanged
    desk = data_dir / "agents" / "desk-001"
    assert not (desk / "prompts" / "plan.md").exists()
    assert json.loads((desk / "config.json").read_text())["planner"]["strategy"] == "plan_replan"
