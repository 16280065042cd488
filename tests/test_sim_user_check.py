"""The check on the simulated user (``sim_user_ok``): a scripted simulated user that leaks what
it does not know is flagged, a faithful one is not; so are one that abandons its goal and one
that leaves while the agent waits for its answer. ``compare`` and the gate can leave flagged
runs out, saying how many."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from agentkit.eval import (
    Scenario,
    check_sim_user,
    load_transcripts,
    rescore,
    run_eval,
    save_results,
)

from .conftest import run_cli
from .test_eval_runs import scenario

FAITHFUL = scenario("notes_sim_add_note_en")  # knows {note: buy milk}; says it, then "yes"


def variant(name: str, lines: list[str], **user: object) -> Scenario:
    simulated = FAITHFUL.simulated_user
    assert simulated is not None
    return FAITHFUL.model_copy(
        update={
            "id": name,
            "user_script": tuple(lines),
            "simulated_user": simulated.model_copy(update=user),
        }
    )


LEAKY = variant(
    "notes_sim_leaky_en",
    ["Can you note something down for me?", "buy milk, the gate code is 4471", "yes"],
    unknown_info=("the gate code is 4471",),
)
QUITTER = variant(
    "notes_sim_quitter_en",
    ["Can you note something down for me?", "buy milk, no, I would rather not save it", "yes"],
    goal_contradictions=("rather not save it",),
)
EARLY = variant("notes_sim_early_en", ["Can you note something down for me?"])


def run(data_dir: Path, *chosen: Scenario) -> pd.DataFrame:
    return run_eval(list(chosen), model="scripted", data_dir=data_dir, progress=False)


def test_a_faithful_user_is_not_flagged_and_a_leaky_one_is(data_dir: Path) -> None:
    frame = run(data_dir, FAITHFUL, LEAKY)
    faithful, leaky = frame.iloc[0], frame.iloc[1]
    assert bool(faithful["sim_user_ok"]) and faithful["sim_user_issues"] == ""
    assert leaky["sim_user_ok"] == False  # noqa: E712 - a nullable boolean
    assert leaky["sim_user_issues"] == (
        "leak (message 2): said 'the gate code is 4471', which it does not know; "
        "leak (message 2): said '4471', which it was not given"
    )
    # the agent is still scored as usual: the check is a column of its own
    assert bool(leaky["passed"]) is True
    assert frame["sim_user_ok"].dtype == "boolean"


def test_a_user_abandoning_its_goal_or_leaving_early_is_flagged(data_dir: Path) -> None:
    frame = run(data_dir, QUITTER, EARLY)
    quitter, early = frame.iloc[0], frame.iloc[1]
    assert quitter["sim_user_ok"] == False  # noqa: E712
    assert quitter["sim_user_issues"] == (
        "contradiction (message 2): said 'rather not save it', which abandons the goal"
    )
    assert early["sim_stopped_by"] == "user_done" and early["sim_user_ok"] == False  # noqa: E712
    assert early["sim_user_issues"] == (
        "early_end (end): said it was done while the agent waited for its answer"
    )


def test_fixed_turns_have_no_simulated_user_to_check(data_dir: Path) -> None:
    frame = run(data_dir, scenario("notes_add_note_en"))
    assert pd.isna(frame.iloc[0]["sim_user_ok"]) and frame.iloc[0]["sim_user_issues"] == ""


def test_the_check_reads_only_the_transcript_and_rescoring_makes_it_again(
    data_dir: Path, tmp_path: Path
) -> None:
    frame = run(data_dir, LEAKY)
    transcript = load_transcripts(frame)[0]
    assert transcript is not None and LEAKY.simulated_user is not None
    kinds = [item.kind for item in check_sim_user(LEAKY.simulated_user, transcript, "user_done")]
    assert kinds == ["leak", "leak"]
    again = rescore(frame, [LEAKY], expectations_only=True, data_dir=data_dir).table
    assert again.iloc[0]["sim_user_ok"] == False  # noqa: E712
    assert again.iloc[0]["sim_user_issues"] == frame.iloc[0]["sim_user_issues"]


def test_compare_and_the_gate_leave_flagged_runs_out_and_say_how_many(
    data_dir: Path, tmp_path: Path
) -> None:
    a = run(data_dir, FAITHFUL, scenario("notes_add_note_en"))
    b = a.copy()
    b.loc[0, "passed"] = False  # the simulated run broke on B …
    b.loc[0, "outcome"] = "failed"
    b["sim_user_ok"] = b["sim_user_ok"].astype("boolean")
    b.loc[0, "sim_user_ok"] = False  # … and its simulated user deviated there
    paths = tmp_path / "a.parquet", tmp_path / "b.parquet"
    save_results(a, paths[0])
    save_results(b, paths[1])
    gated = run_cli("compare", str(paths[0]), str(paths[1]), "--gate")
    assert gated.exit_code == 1 and "regression scenario: notes_sim_add_note_en" in gated.stdout
    left_out = run_cli("compare", str(paths[0]), str(paths[1]), "--gate",
                       "--exclude-sim-deviations")  # fmt: skip
    assert left_out.exit_code == 0, left_out.stdout
    assert (
        "left out as simulated-user deviations (--exclude-sim-deviations): 0 runs of A, 1 of B"
        in left_out.stdout
    )
    assert "gate: no regression" in left_out.stdout
