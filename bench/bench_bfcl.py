"""BFCL on the embedded model: the model alone (BFCL's prompt mode) vs agentkit's strategies.

Figures, not pass/fail (``make bench``); issue 36's targets.

1. **Single- and multi-turn categories**: a seeded sample of ``--limit`` items per category
   (default 50, seed 0; the same items as ``agentkit eval bfcl:CATEGORY --limit 50 --seed 0``),
   run by the embedded model (``llama``, SmolLM2-135M) in BFCL's prompt mode (its system
   prompt and call format, greedy, decoded by BFCL's decoder) and through agentkit's planner
   with each strategy (``plan_replan``, ``next_step``, ``tool_loop``), with the model choosing
   the first action and with the router (``planner.tool_choice``; a third part names the
   router's embedder: ``tool_loop+router+wordllama``; ``+said`` limits the arguments to
   values the conversation holds, ``planner.argument_values: said``). Scored by BFCL's
   checkers.
2. **The memory set as a compression benchmark** (``--memory``): each question after its
   domain's prerequisite conversation, with compression ``model`` / ``extractive`` /
   ``hybrid`` (replayed, compressed, asked restored: scenario C), and the two baselines
   ``whole`` (the whole conversation in the window, as far as the planner's prompt fits it)
   and ``none`` (no history). Accuracy, prompt tokens of the question's turn, p95 turn latency.

**Incremental and resumable.** The sample is run item by item in a seeded order (a shuffle of
the sample, so the first *k* items run are themselves a random sample of the category: a run
cut short still measures something), the categories taking turns, every mode on an item
before the next item. Each
finished run is one line of the journal (``--journal``, default
``bench/results/bfcl_runs.jsonl``); a rerun skips what the journal holds (a run that ended in
an error is tried once more), so a killed bench resumes where it stopped. When a mode has run
a category's whole sample, its summary row (accuracy with a 95% Wilson interval, model calls,
prompt tokens, median latency, median CPU seconds of the model per item, p95 turn latency,
BFCL's top error kinds) is appended to ``bench/results/bfcl.csv``; ``--summarize`` prints the
table from the journal alone (whatever has run) and with ``--write`` appends the rows of the
sample sizes reached. Latency on a shared machine depends on its load; the CPU seconds (the
bench's own and its model worker's) do much less.

    python bench/bench_bfcl.py --categories simple_python,irrelevance --modes prompt,tool_loop+model
    python bench/bench_bfcl.py --categories memory --memory extractive,whole,none --limit 15
    python bench/bench_bfcl.py --summarize --write
    # the held-out sample (issue 48): 50 items per category outside the seed-0 and seed-1
    # samples, drawn with seed 2, in a journal of its own
    python bench/bench_bfcl.py --categories simple_python,multiple,irrelevance \
        --modes tool_loop+router+wordllama+said --seed 2 --outside 0,1 \
        --journal bench/results/bfcl_runs.holdout.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from agentkit import testing
from agentkit.eval import run_eval
from agentkit.eval.bfcl import load_suite
from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
from agentkit.eval.bfcl.suite import BfclScenario
from agentkit.eval.bfcl.summary import overall_accuracy
from agentkit.eval.bfcl.toolset import find_item

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "bfcl.csv"
JOURNAL = REPO / "bench" / "results" / "bfcl_runs.jsonl"
CATEGORIES = (
    "simple_python",
    "multiple",
    "irrelevance",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_irrelevance",
    "multi_turn_base",
    "multi_turn_miss_param",
)
STRATEGIES = ("plan_replan", "next_step", "tool_loop")
MODES = (
    "prompt",
    *(f"{s}+{c}{a}" for s in STRATEGIES for c in ("model", "router") for a in ("", "+said")),
)
MEMORY = ("model", "extractive", "hybrid", "whole", "none")
#: seconds a turn may take: generous, the bench shares its cores and may be paused (SIGSTOP)
TURN_TIMEOUT = 3600.0
#: how many times a run that ended in an error is tried in all
ATTEMPTS = 2
FIELDS = (
    "at", "host", "model", "seed", "limit", "mode", "category", "runs", "valid", "accuracy",
    "ci95_low", "ci95_high", "errors", "model_calls_mean", "input_tokens_mean",
    "latency_ms_median", "cpu_s_median", "question_prompt_tokens_mean", "turn_ms_p95",
    "top_error_types",
)  # fmt: skip


@dataclass(frozen=True)
class Job:
    """One run: an item of a category in a mode (``memory:CONTEXT`` for the memory set)."""

    mode: str
    category: str
    scenario: BfclScenario
    position: int  # 1-based, in the seeded order
    size: int

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.mode, self.category, self.scenario.bfcl.item)


# --- the sample, in its seeded order ---------------------------------------------------------


def ordered_sample(
    category: str, limit: int, seed: int, *, outside: tuple[int, ...] = (), **options: Any
) -> list[BfclScenario]:
    """The category's seeded sample (the CLI's ``--limit/--seed`` items), shuffled by *seed*;
    with *outside*, drawn with *seed* from the items outside the samples of those seeds (a
    held-out sample: nothing tuned on it)."""
    if not outside:
        scenarios = load_suite(f"bfcl:{category}", limit=limit, seed=seed, **options)
    else:
        seen = {
            scenario.bfcl.item
            for used in outside
            for scenario in load_suite(f"bfcl:{category}", limit=limit, seed=used, **options)
        }
        rest = [
            s for s in load_suite(f"bfcl:{category}", **options) if s.bfcl.item not in seen
        ]
        scenarios = random.Random(f"holdout-{seed}").sample(rest, min(limit, len(rest)))
    random.Random(f"bench-order-{seed}").shuffle(scenarios)
    return scenarios


def jobs(args: argparse.Namespace) -> Iterator[Job]:
    """Every run asked for: item by item, the categories taking turns (item 1 of each, then
    item 2 of each…) and every mode on an item before the next; the memory set last."""
    modes = _split(args.modes)
    categories = [c for c in _split(args.categories) if c != "memory"]
    outside = tuple(int(x) for x in _split(args.outside)) if args.outside else ()
    samples = {
        c: ordered_sample(c, args.limit, args.seed, outside=outside)[: args.items]
        for c in categories
    }
    for position in range(max((len(s) for s in samples.values()), default=0)):
        for category, sample in samples.items():
            if position < len(sample):
                for mode in modes:
                    yield Job(mode, category, sample[position], position + 1, len(sample))
    if "memory" in _split(args.categories):
        yield from _memory_jobs(args)


def _memory_jobs(args: argparse.Namespace) -> Iterator[Job]:
    contexts = _split(args.memory)
    samples = {
        c: ordered_sample("memory", args.memory_limit, args.seed, memory_context=_context(c))[
            : args.items
        ]
        for c in contexts
    }
    size = min((len(s) for s in samples.values()), default=0)
    for position in range(size):
        for context in contexts:
            yield Job(f"memory:{context}", "memory", samples[context][position], position + 1, size)


def _context(context: str) -> Any:  # the suite's MemoryContext literal
    return context if context in ("whole", "none") else "compressed"


def _split(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


# --- running one job -----------------------------------------------------------------------


def run_job(job: Job, *, model: str, root: Path) -> dict[str, Any]:
    """Run *job*; its row (the harness's columns)."""
    if job.mode == "prompt":
        rows = run_prompt_mode([find_item(job.scenario.bfcl.item)], model)
        return rows[0]
    sets: dict[str, object]
    if job.mode.startswith("memory:"):
        context = job.mode.split(":", 1)[1]
        sets = {"planner.strategy": "tool_loop"}
        if _context(context) == "compressed":
            sets["compression.strategy"] = context
    else:
        strategy, choice, *options = job.mode.split("+")
        sets = {"planner.strategy": strategy, "planner.tool_choice": choice}
        for option in options:
            if option == "said":
                sets["planner.argument_values"] = "said"
            else:
                sets["planner.router_embedder"] = option
    frame = run_eval(
        [job.scenario],
        model=model,
        data_dir=root,
        progress=False,
        turn_timeout=TURN_TIMEOUT,
        sets=sets,
    )
    record = frame.to_dict("records")[0]
    return {str(key): value for key, value in record.items()}


def cpu_seconds() -> float:
    """CPU seconds of this process and of its live children (the model's worker process)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:  # ppid; utime and stime are fields 14 and 15 of stat
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


_KEPT = (
    "bfcl_valid", "bfcl_error_type", "error", "model_calls", "input_tokens", "output_tokens",
    "latency_ms", "bfcl_prompt_tokens", "bfcl_turn_ms",
)  # fmt: skip


def journal_line(job: Job, row: dict[str, Any], *, args: argparse.Namespace, wall: float,
                 cpu: float) -> dict[str, Any]:  # fmt: skip
    line: dict[str, Any] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "model": args.model,
        "seed": args.seed,
        "mode": job.mode,
        "category": job.category,
        "bfcl_id": job.scenario.bfcl.item,
        "position": job.position,
    }
    for key in _KEPT:
        value = row.get(key)
        line[key] = None if _missing(value) else _plain(value)
    line["error"] = line["error"] or ""
    line["wall_s"] = round(wall, 2)
    line["cpu_s"] = round(cpu, 2)
    return line


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    return item() if callable(item) else value


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.strip():
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return lines


def latest(lines: list[dict[str, Any]], model: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per run the line that counts: the last without an error, else the last."""
    kept: dict[tuple[str, str, str], dict[str, Any]] = {}
    for line in lines:
        if line.get("model") != model:
            continue
        key = (line["mode"], line["category"], line["bfcl_id"])
        if key not in kept or not line.get("error") or kept[key].get("error"):
            kept[key] = line
    return kept


def attempts(lines: list[dict[str, Any]], model: str) -> dict[tuple[str, str, str], int]:
    counted: dict[tuple[str, str, str], int] = {}
    for line in lines:
        if line.get("model") == model:
            key = (line["mode"], line["category"], line["bfcl_id"])
            counted[key] = counted.get(key, 0) + 1
    return counted


# --- summaries ------------------------------------------------------------------------------


def wilson(valid: int, runs: int) -> tuple[float, float]:
    """The 95% Wilson score interval of *valid* in *runs*."""
    if runs == 0:
        return (0.0, 1.0)
    z = 1.959964
    p = valid / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _numbers(lines: list[dict[str, Any]], key: str) -> list[float]:
    return [float(line[key]) for line in lines if isinstance(line.get(key), (int, float))]


def summary_row(lines: list[dict[str, Any]], *, mode: str, category: str,
                args: argparse.Namespace, limit: int) -> dict[str, Any]:  # fmt: skip
    valid = sum(1 for line in lines if line.get("bfcl_valid"))
    low, high = wilson(valid, len(lines))
    latency, cpu = _numbers(lines, "latency_ms"), _numbers(lines, "cpu_s")
    prompt, turn_ms = _numbers(lines, "bfcl_prompt_tokens"), _numbers(lines, "bfcl_turn_ms")
    calls, tokens = _numbers(lines, "model_calls"), _numbers(lines, "input_tokens")
    kinds: dict[str, int] = {}
    for line in lines:
        if line.get("bfcl_error_type"):
            kinds[line["bfcl_error_type"]] = kinds.get(line["bfcl_error_type"], 0) + 1
    top = sorted(kinds.items(), key=lambda kv: -kv[1])[:2]
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "model": args.model,
        "seed": args.seed,
        "limit": limit,
        "mode": mode,
        "category": category,
        "runs": len(lines),
        "valid": valid,
        "accuracy": round(valid / len(lines), 3) if lines else None,
        "ci95_low": round(low, 3),
        "ci95_high": round(high, 3),
        "errors": sum(1 for line in lines if line.get("error")),
        "model_calls_mean": round(statistics.mean(calls), 2) if calls else None,
        "input_tokens_mean": round(statistics.mean(tokens), 1) if tokens else None,
        "latency_ms_median": round(statistics.median(latency), 1) if latency else None,
        "cpu_s_median": round(statistics.median(cpu), 2) if cpu else None,
        "question_prompt_tokens_mean": round(statistics.mean(prompt), 1) if prompt else None,
        "turn_ms_p95": _p95(turn_ms),
        "top_error_types": "; ".join(f"{k} {v}" for k, v in top),
    }


def groups(args: argparse.Namespace) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (mode, category) asked for, the journal's runs of the sample's items so far."""
    kept = latest(read_journal(args.journal), args.model)
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for job in jobs(args):
        line = kept.get(job.key)
        found.setdefault((job.mode, job.category), [])
        if line is not None:
            found[(job.mode, job.category)].append(line)
    return found


def write_rows(rows: list[dict[str, Any]]) -> None:
    """Append *rows* to the results CSV, leaving out any it holds already (same figures)."""
    existing: list[dict[str, str]] = []
    if RESULTS.exists():
        with RESULTS.open(newline="", encoding="utf-8") as handle:
            existing = list(csv.DictReader(handle))
    same = ("model", "seed", "limit", "mode", "category", "runs", "valid")
    seen = {tuple(str(r.get(k, "")) for k in same) for r in existing}
    fresh = [r for r in rows if tuple(str(r[k]) for k in same) not in seen]
    if not fresh:
        return
    header = list(existing[0]) if existing else []
    fields = header + [f for f in FIELDS if f not in header]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if fields != header:  # new columns: rewrite the file with the wider header
        with RESULTS.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(existing)
    with RESULTS.open("a", newline="", encoding="utf-8") as handle:
        csv.DictWriter(handle, fieldnames=fields).writerows(fresh)
    print(f"appended {len(fresh)} rows to {RESULTS.relative_to(REPO)}", flush=True)


def report(args: argparse.Namespace, *, write: bool) -> None:
    rows = []
    sizes = {(j.mode, j.category): j.size for j in jobs(args)}
    for (mode, category), lines in groups(args).items():
        if lines:
            rows.append(summary_row(lines, mode=mode, category=category, args=args,
                                    limit=sizes[(mode, category)]))  # fmt: skip
    if not rows:
        print("nothing in the journal for these categories and modes yet")
        return
    table = pd.DataFrame(rows)
    cells = table.assign(cell=[
        f"{r.valid}/{r.runs} ({r.ci95_low:.0%}-{r.ci95_high:.0%})" for r in table.itertuples()
    ])  # fmt: skip
    pivot = cells.pivot(index="mode", columns="category", values="cell").fillna("—")
    print("\nvalid/runs (95% Wilson interval), BFCL's checkers:")
    print(pivot.to_string())
    for mode in dict.fromkeys(r["mode"] for r in rows):
        accuracy = {r["category"]: r["accuracy"] for r in rows if r["mode"] == mode}
        total = overall_accuracy(accuracy)
        if total is not None and not mode.startswith("memory"):
            print(f"  {mode}: BFCL overall over the categories run {total:.1%}")
    print(table[["mode", "category", "runs", "model_calls_mean", "input_tokens_mean",
                 "latency_ms_median", "cpu_s_median", "question_prompt_tokens_mean",
                 "turn_ms_p95"]].to_string(index=False))  # fmt: skip
    if write:
        write_rows(rows)


# --- the run --------------------------------------------------------------------------------


def _root() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="bench-bfcl-")) / "data"
    return testing.data_root(scratch, ["bfcl-001"], source=REPO / "data")


def run(args: argparse.Namespace) -> None:
    lines = read_journal(args.journal)
    kept, tried = latest(lines, args.model), attempts(lines, args.model)
    root = _root()
    args.journal.parent.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, str], list[dict[str, Any]]] = {}
    pending = list(jobs(args))
    print(f"{len(pending)} runs asked for; journal {args.journal}", flush=True)
    with testing.allow_model_requests():
        for job in pending:
            line = kept.get(job.key)
            again = line is not None and line.get("error") and tried.get(job.key, 0) < ATTEMPTS
            if line is None or again:
                started_cpu, started = cpu_seconds(), time.perf_counter()
                row = run_job(job, model=args.model, root=root)
                wall, cpu = time.perf_counter() - started, cpu_seconds() - started_cpu
                line = journal_line(job, row, args=args, wall=wall, cpu=cpu)
                with args.journal.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(line) + "\n")
                verdict = "valid" if line["bfcl_valid"] else line["bfcl_error_type"] or "invalid"
                if line["error"]:
                    verdict = f"error: {line['error'][:80]}"
                print(
                    f"[{job.category} {job.position}/{job.size} {job.scenario.bfcl.item}] "
                    f"{job.mode:24} {verdict:48} {wall:7.1f} s wall {cpu:7.1f} s cpu "
                    f"{line['model_calls'] or 0} calls {line['input_tokens'] or 0} tok",
                    flush=True,
                )
            group = done.setdefault((job.mode, job.category), [])
            group.append(line)
            if len(group) == job.size:  # the whole sample in this mode: its row
                write_rows([summary_row(group, mode=job.mode, category=job.category,
                                        args=args, limit=job.size)])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama")
    parser.add_argument("--limit", type=int, default=50, help="the sample per category")
    parser.add_argument("--items", type=int, help="run only the first N of each sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--outside",
        default="",
        help="a held-out sample: draw with --seed from the items outside these seeds' samples",
    )
    parser.add_argument("--categories", default=",".join((*CATEGORIES, "memory")))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--memory", default=",".join(MEMORY), help="contexts of the memory set")
    parser.add_argument("--memory-limit", type=int, default=15)
    parser.add_argument("--journal", type=Path, default=JOURNAL)
    parser.add_argument("--summarize", action="store_true", help="only the table, no runs")
    parser.add_argument("--write", action="store_true", help="with --summarize: append rows")
    args = parser.parse_args(argv)
    if not args.summarize:
        run(args)
    report(args, write=args.write or not args.summarize)
    return 0


if __name__ == "__main__":
    sys.exit(main())
