"""Tool routing on the embedded model: first-tool accuracy and latency, by signal.

Runs the first-tool tables (``data/scenarios/first_tool/``: the desk, the notes agent and the
calendar agent, dev and held-out rows) with the embedded model, stopping each turn at its
first action, and prints per table, split and held-out batch: accuracy, "no tool" precision,
side-effecting false positives, and the latency of the calls that chose the action (median,
p90) — the router's ``route`` calls (the request's embedding included), or without it the
strategy's first ``act``/``plan`` call — plus the time from sending to the first action.
Figures, not pass/fail: summaries are appended to bench/results/router.csv and the rows
written to bench/results/first_tool_<label>.csv.

    python bench/bench_router.py                       # router, every signal (the default)
    python bench/bench_router.py --signals lexical     # the word-only router (before issue 29)
    python bench/bench_router.py --signals lexical,settle --split dev
    python bench/bench_router.py --off                 # the strategies' own first call (slow)
    python bench/bench_router.py --defaults            # each agent's own config, untouched
    python bench/bench_router.py --embedder model      # the semantic signal from the model

Without ``--embedder`` the semantic signal comes from each agent's own ``router_embedder``
(the sample agents say ``wordllama``; the tables in docs/benchmarks.md were measured with
``model``, the embedded model's own vectors).

The machine's load is printed with the figures: on shared cores the latencies are upper
bounds, and medians are the figures to quote.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from agentkit.eval.first_tool import (
    first_tool_report,
    first_tool_summary,
    load_first_tool_tables,
    run_first_tool,
)
from pydantic import JsonValue

REPO = Path(__file__).resolve().parents[1]
TABLES = REPO / "data" / "scenarios" / "first_tool"
RESULTS = Path(__file__).parent / "results" / "router.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", action="store_true", help="router off (tool_choice=model)")
    parser.add_argument("--defaults", action="store_true", help="each agent's own config")
    parser.add_argument("--signals", default="", help="router_signals, comma-separated")
    parser.add_argument("--split", choices=["dev", "heldout"], action="append")
    parser.add_argument("--table", action="append", help="a table's name (default: all)")
    parser.add_argument("--model", default="llama")
    parser.add_argument("--embedder", choices=["model", "wordllama"], help="router_embedder")
    parser.add_argument("--label", default="", help="names the per-row CSV")
    args = parser.parse_args()
    params: dict[str, JsonValue] = {}
    if not args.defaults:
        params["planner.tool_choice"] = "model" if args.off else "router"
    if args.signals:
        params["planner.router_signals"] = list(args.signals.split(","))
    if args.embedder:
        params["planner.router_embedder"] = args.embedder
    mode = "defaults" if args.defaults else "model" if args.off else "router"
    signals = args.signals or ("" if args.off or args.defaults else "all")
    paths = [TABLES / f"{name}.yaml" for name in args.table] if args.table else [TABLES]
    load = os.getloadavg()[0]
    rows = run_first_tool(
        load_first_tool_tables(paths),
        data_dir=REPO / "data",
        model=args.model,
        params=params,
        splits=tuple(args.split or ("dev", "heldout")),
    )
    summary = first_tool_summary(rows, by_batch=True)
    after = os.getloadavg()[0]
    embedder = args.embedder or "agents'"
    print(f"tool_choice={mode} signals={signals} embedder={embedder} model={args.model}")
    print(f"cpus={os.cpu_count()}")
    print(f"1-minute load average: {load:.1f} before, {after:.1f} after (shared machine)")
    print(first_tool_report(summary))
    RESULTS.parent.mkdir(exist_ok=True)
    fields = ["when", "machine", "load", "tool_choice", "signals", "model", *summary[0].keys()]
    new = not RESULTS.exists()
    if not new:
        with RESULTS.open(encoding="utf-8") as file:
            new = "signals" not in file.readline()  # an older header: start the file anew
    with RESULTS.open("w" if new else "a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        when = datetime.now(UTC).isoformat(timespec="seconds")
        for item in summary:
            writer.writerow({
                "when": when,
                "machine": platform.machine(),
                "load": f"{load:.1f}-{after:.1f}",
                "tool_choice": mode,
                "signals": signals,
                "model": args.model,
                **item,
            })  # fmt: skip
    label = args.label or f"{mode}_{signals.replace(',', '+') or 'none'}"
    label += f"_{args.embedder}" if args.embedder and not args.label else ""
    with (RESULTS.parent / f"first_tool_{label}.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
