"""BFCL on the embedded model: the model alone (BFCL's prompt mode) vs agentkit's strategies.

Figures, not pass/fail (``make bench``); issue 36's targets.

1. **Single- and multi-turn categories**: a seeded sample of ``--limit`` items per category
   (default 50, seed 0), run by the embedded model (``llama``, SmolLM2-135M) in BFCL's prompt
   mode (its system prompt and call format, greedy, decoded by BFCL's decoder) and through
   agentkit's planner with each strategy (``plan_replan``, ``next_step``, ``tool_loop``), with
   the model choosing the first action and with the router (``planner.tool_choice``). Scored
   by BFCL's checkers. Per mode and category: accuracy, runs, model calls, prompt tokens and
   the median latency per item; per mode BFCL's overall formula over the categories run.
2. **The memory set as a compression benchmark** (``--memory``): each question after its
   domain's prerequisite conversation, with compression ``model`` / ``extractive`` /
   ``hybrid`` (replayed, compressed, asked restored: scenario C), and the two baselines
   ``whole`` (the whole conversation in the window, as far as the planner's prompt fits it)
   and ``none`` (no history). Accuracy, prompt tokens of the question's turn, p95 turn latency.

Results are printed and appended to ``bench/results/bfcl.csv`` (one row per mode and
category). ``--limit``/``--categories``/``--modes`` make a smaller run: the bench on the
embedded model takes about a second per model call, so the full default is hours.
"""

from __future__ import annotations

import argparse
import csv
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from agentkit import testing
from agentkit.eval import run_eval
from agentkit.eval.bfcl import load_suite
from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
from agentkit.eval.bfcl.summary import overall_accuracy
from agentkit.eval.bfcl.toolset import find_item

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "bfcl.csv"
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
MODES = ("prompt", *(f"{s}+{c}" for s in STRATEGIES for c in ("model", "router")))
MEMORY = ("model", "extractive", "hybrid", "whole", "none")


def _root() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="bench-bfcl-")) / "data"
    return testing.data_root(scratch, ["bfcl-001"], source=REPO / "data")


def run_category(
    category: str, modes: list[str], limit: int, seed: int, *, model: str, root: Path
) -> pd.DataFrame:
    scenarios = load_suite(f"bfcl:{category}", limit=limit, seed=seed)
    frames = []
    for mode in modes:
        started = time.perf_counter()
        if mode == "prompt":
            items = [find_item(s.bfcl.item) for s in scenarios]
            frame = pd.DataFrame(run_prompt_mode(items, model))
        else:
            strategy, choice = mode.split("+")
            frame = run_eval(
                scenarios,
                model=model,
                data_dir=root,
                progress=False,
                turn_timeout=600,
                sets={"planner.strategy": strategy, "planner.tool_choice": choice},
            )
        frame["mode"] = mode
        valid = int(frame["bfcl_valid"].fillna(False).astype(bool).sum())
        took = time.perf_counter() - started
        print(f"  {category:24} {mode:22} {valid}/{len(frame)}  ({took:.0f} s)", flush=True)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def run_memory(contexts: list[str], limit: int, seed: int, model: str, root: Path) -> pd.DataFrame:
    frames = []
    for context in contexts:
        memory_context = context if context in ("whole", "none") else "compressed"
        scenarios = load_suite("bfcl:memory", limit=limit, seed=seed, memory_context=memory_context)  # type: ignore[arg-type]
        sets: dict[str, object] = {"planner.strategy": "tool_loop"}
        if memory_context == "compressed":
            sets["compression.strategy"] = context
        started = time.perf_counter()
        frame = run_eval(
            scenarios, model=model, data_dir=root, progress=False, turn_timeout=900, sets=sets
        )
        frame["mode"] = f"memory:{context}"
        valid = int(frame["bfcl_valid"].fillna(False).astype(bool).sum())
        took = time.perf_counter() - started
        print(f"  memory {context:17} {valid}/{len(frame)}  ({took:.0f} s)", flush=True)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _numbers(group: pd.DataFrame, column: str) -> list[float]:
    if column not in group:
        return []
    return [float(v) for v in pd.to_numeric(group[column], errors="coerce").dropna()]


def summarize(frame: pd.DataFrame, args: argparse.Namespace) -> list[dict[str, Any]]:
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows: list[dict[str, Any]] = []
    for (mode, category), group in frame.groupby(["mode", "bfcl_category"], sort=False):
        valid = group["bfcl_valid"].fillna(False).astype(bool)
        latency = _numbers(group, "latency_ms")
        prompt = _numbers(group, "bfcl_prompt_tokens")
        turn_ms = _numbers(group, "bfcl_turn_ms")
        errors = group["error"].fillna("").astype(str)
        kinds = group["bfcl_error_type"].fillna("").astype(str)
        top = kinds[kinds != ""].value_counts().head(2)
        rows.append({
            "at": at,
            "host": platform.node(),
            "model": args.model,
            "seed": args.seed,
            "limit": args.limit,
            "mode": mode,
            "category": category,
            "runs": len(group),
            "valid": int(valid.sum()),
            "accuracy": round(float(valid.mean()), 3),
            "errors": int((errors != "").sum()),
            "model_calls_mean": round(float(pd.to_numeric(group["model_calls"]).mean()), 2),
            "input_tokens_mean": round(float(pd.to_numeric(group["input_tokens"]).mean()), 1),
            "latency_ms_median": round(statistics.median(latency), 1) if latency else None,
            "question_prompt_tokens_mean": round(statistics.mean(prompt), 1) if prompt else None,
            "turn_ms_p95": _p95(turn_ms),
            "top_error_types": "; ".join(f"{k} {v}" for k, v in top.items()),
        })  # fmt: skip
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    table = pd.DataFrame(rows)
    if table.empty:
        return
    pivot = table.pivot_table(index="mode", columns="category", values="accuracy", sort=False)
    print("\naccuracy (BFCL's checkers) by mode and category:")
    print(pivot.to_string(float_format=lambda v: f"{v:.0%}"))
    for mode, group in table.groupby("mode", sort=False):
        accuracy = {r["category"]: r["accuracy"] for _, r in group.iterrows()}
        total = overall_accuracy(accuracy)
        if total is not None and not str(mode).startswith("memory"):
            print(f"  {mode}: BFCL overall over the categories run {total:.1%}")


def write(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0])
    fresh = not RESULTS.exists()
    with RESULTS.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        if fresh:
            writer.writeheader()
        writer.writerows(rows)
    print(f"appended {len(rows)} rows to {RESULTS.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--memory", default=",".join(MEMORY), help="'' to skip the memory set")
    parser.add_argument("--memory-limit", type=int, default=15)
    parser.add_argument("--runs", type=Path, help="also write the per-run table (.csv)")
    args = parser.parse_args(argv)
    root = _root()
    modes = [m for m in args.modes.split(",") if m]
    frames, rows = [], []
    with testing.allow_model_requests():
        for category in [c for c in args.categories.split(",") if c]:
            frame = run_category(
                category, modes, args.limit, args.seed, model=args.model, root=root
            )
            frames.append(frame)
            done = summarize(frame, args)
            write(done)  # each category as it ends: a stopped run keeps what it measured
            rows += done
        contexts = [c for c in args.memory.split(",") if c]
        if contexts:
            frame = run_memory(contexts, args.memory_limit, args.seed, args.model, root)
            frames.append(frame)
            done = summarize(frame, args)
            write(done)
            rows += done
    if args.runs is not None and frames:
        pd.concat(frames, ignore_index=True).to_csv(args.runs, index=False)
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
