"""Agreement of a judge with a person's labels: Cohen's kappa and its bootstrap interval equal
an independent computation (scikit-learn, in the tests only); too few labels give no figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from agentkit.eval import Judge, load_results, run_eval, run_ids, save_results
from agentkit.eval.agreement import agreement
from agentkit.eval.scoring import rescore
from agentkit.eval.stats import bootstrap_picks, cohen_kappa, kappa_bootstrap
from agentkit.testing import FunctionModel, ModelRequest
from sklearn.metrics import cohen_kappa_score

from .conftest import run_cli, tree
from .test_eval_runs import SCENARIOS

# fixed labels: 24 runs, a person and a judge that mostly agree
HUMAN = list("ppfpffpppfpfppfpfpppffpf")
JUDGE = list("ppfffppppfpfpffpfpppfppf")
SCORES_H = [1, 2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 2, 1, 3, 3, 2]
SCORES_J = [1, 2, 3, 2, 2, 1, 2, 2, 3, 3, 1, 2, 1, 3, 2, 2]


def _sklearn_interval(a: list[object], b: list[object], seed: int, resamples: int) -> tuple:
    """The percentile interval of sklearn's kappa over the same resamples (undefined ones
    left out)."""
    picks = bootstrap_picks(len(a), seed=seed, resamples=resamples)
    left, right = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    values = []
    for row in picks:
        x, y = list(left[row]), list(right[row])
        if len(set(x) | set(y)) == 1:
            continue  # one category only: kappa undefined (sklearn warns and gives NaN)
        values.append(cohen_kappa_score(x, y))
    return tuple(np.quantile(np.asarray(values), [0.025, 0.975]))


@pytest.mark.parametrize(("a", "b"), [(HUMAN, JUDGE), (SCORES_H, SCORES_J)])
def test_kappa_and_its_interval_equal_scikit_learns(a: list[object], b: list[object]) -> None:
    expected = cohen_kappa_score(a, b)
    assert cohen_kappa(a, b) == pytest.approx(expected, abs=1e-9)
    kappa, low, high = kappa_bootstrap(a, b, seed=7, resamples=100)
    assert kappa == pytest.approx(expected, abs=1e-9)
    want_low, want_high = _sklearn_interval(a, b, seed=7, resamples=100)
    assert (low, high) == (pytest.approx(want_low, abs=1e-9), pytest.approx(want_high, abs=1e-9))
    assert low < kappa < high


def test_the_same_seed_gives_the_same_interval_and_another_seed_another() -> None:
    first = kappa_bootstrap(HUMAN, JUDGE, seed=3)
    assert kappa_bootstrap(HUMAN, JUDGE, seed=3) == first
    assert kappa_bootstrap(HUMAN, JUDGE, seed=4)[1:] != first[1:]


def test_kappa_is_undefined_when_both_always_say_the_same() -> None:
    assert math.isnan(cohen_kappa(["pass"] * 5, ["pass"] * 5))
    assert cohen_kappa(["pass", "fail"], ["pass", "fail"]) == 1.0


def test_agreement_reports_rate_kappa_confusion_and_the_disagreements() -> None:
    runs = [f"s{i}--p0" for i in range(len(HUMAN))]
    human = dict(zip(runs, ["pass" if v == "p" else "fail" for v in HUMAN], strict=True))
    judge: dict[str, str | float | None] = {
        run: "pass" if v == "p" else "fail" for run, v in zip(runs, JUDGE, strict=True)
    }
    judge["s0--p0"] = None  # a judge_error: left out, counted apart
    result = agreement(human, judge, name="rubric", notes={"s3--p0": "it did not ask"}, seed=11)
    assert result.enough and result.runs == len(runs) - 1 and result.unjudged == 1
    pairs = [(human[r], judge[r]) for r in runs[1:]]
    assert result.rate == pytest.approx(sum(h == j for h, j in pairs) / len(pairs))
    assert result.kappa == pytest.approx(
        cohen_kappa_score([h for h, _ in pairs], [j for _, j in pairs]), abs=1e-9
    )
    confusion = result.confusion()
    assert int(confusion.to_numpy().sum()) == len(pairs)
    assert int(confusion.loc["pass", "fail"]) == sum(h == "pass" and j == "fail" for h, j in pairs)
    assert [d.run for d in result.disagreements] == [r for r in runs[1:] if human[r] != judge[r]]
    text = result.report()
    assert "seed 11" in text and "kappa" in text
    assert "s3--p0: human pass, judge fail  — it did not ask" in text


def test_too_few_labelled_runs_say_so_instead_of_a_number() -> None:
    human = {"a": "pass", "b": "fail", "c": "pass"}
    result = agreement(human, {"a": "pass", "b": "pass", "c": "pass"}, name="rubric")
    assert not result.enough
    assert result.rate is None and result.kappa is None and result.low is None
    line = result.summary()
    assert "too few" in line and "label 7 more" in line
    assert "%" not in line  # no number pretending to be a figure


# -- agentkit agreement over a judged table ----------------------------------------------------


def _grader(request: ModelRequest) -> str:
    """A grader that fails every run whose judge is shown a failed tool call."""
    verdict = "fail" if "(FAILED)" in request.messages[-1].content else "pass"
    return json.dumps({"verdict": verdict, "reason": "from the tool calls"})


@pytest.fixture
def judged(data_dir: Path, tmp_path: Path) -> Path:
    """Ten runs (five notes scenarios at two points) judged by ``tools`` (a FunctionModel
    grader), saved as a table."""
    chosen = [SCENARIOS / f"{name}.yaml" for name in NOTES]
    grid = {"compression.token_threshold": [300, 2000]}
    frame = run_eval(chosen, model="scripted", grid=grid, data_dir=data_dir, progress=False)
    judge = Judge(name="tools", rubric="No tool call failed.", sees=("answer", "tool_calls"))
    scored = rescore(frame, chosen, judges=[judge], judge_model=FunctionModel(_grader),
                     data_dir=data_dir)  # fmt: skip
    return save_results(scored.table, tmp_path / "judged.parquet")


NOTES = ["notes_add_note_en", "notes_search_en", "notes_delete_missing_zh",
         "notes_live_state_en", "notes_delete_refused_zh"]  # fmt: skip


def test_agreement_cli_prints_kappa_its_seed_the_confusion_and_the_disagreements(
    judged: Path, tmp_path: Path
) -> None:
    table = load_results(judged)
    runs = run_ids(table)
    verdicts = dict(zip(runs, table["judge_tools"].astype(str), strict=True))
    assert sorted(set(verdicts.values())) == ["fail", "pass"]
    # the person disagrees on one run: the delete of a missing note was handled well
    missing = "notes_delete_missing_zh--p0"
    assert verdicts[missing] == "fail"
    for run in runs:
        label = "pass" if run == missing else verdicts[run]
        assert run_cli("label", str(judged), run, label, "--note", "ok").exit_code == 0
    done = run_cli("agreement", str(judged), "--judge", "tools", "--seed", "5")
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    human = [verdicts[r] if r != missing else "pass" for r in runs]
    judge = [verdicts[r] for r in runs]
    kappa = cohen_kappa_score(human, judge)
    assert lines[0].startswith("judge tools: agreement 90.0% on 10 runs, ")
    assert f"kappa {kappa:.3f} [" in lines[0] and "seed 5)" in lines[0]
    assert "judge tools  fail  pass" in done.stdout
    assert f"  {missing}: human pass, judge fail  — ok" in lines
    # the same seed, the same interval
    again = run_cli("agreement", str(judged), "--judge", "tools", "--seed", "5")
    assert again.stdout == done.stdout
    # a re-scored copy reads the labels of the table it came from
    copy = save_results(table, tmp_path / "copy.csv")
    bare = run_cli("agreement", str(copy), "--judge", "tools")
    assert "0 runs labelled and judged, too few" in bare.stdout
    given = run_cli("agreement", str(copy), "--judge", "tools", "--labels-of", str(judged))
    assert given.stdout.splitlines()[0].startswith("judge tools: agreement 90.0% on 10 runs")


def test_agreement_cli_refuses_an_unknown_judge_in_one_line(judged: Path) -> None:
    before = tree(judged.parent)
    done = run_cli("agreement", str(judged), "--judge", "nope")
    assert done.exit_code == 2
    assert done.stderr == "agentkit: error: no judge 'nope' in this table (its judges: tools)\n"
    few = run_cli("agreement", str(judged), "--judge", "tools")
    assert few.exit_code == 0 and "too few for an agreement figure" in few.stdout
    assert tree(judged.parent) == before
