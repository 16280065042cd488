"""Tool routing on the embedded model: first-tool accuracy and latency, router on and off.

Runs the first-tool tables (``data/scenarios/first_tool/``: the desk and the notes agent,
dev and held-out rows) with the embedded model, stopping each turn at its first action, and
prints per table and split: accuracy, "no tool" precision, side-effecting false positives,
and the latency of the calls that chose the action (median, p90) — the router's ``route``
calls, or without it the strategy's first ``act``/``plan`` call — plus the time from sending
to the first action. Figures, not pass/fail; rows are appended to bench/results/router.csv.

    python bench/bench_router.py            # router on (the default here)
    python bench/bench_router.py --off      # the strategies' own first call (slow: ~20 s each)
    python bench/bench_router.py --split dev
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

REPO = Path(__file__).resolve().parents[1]
TABLES = REPO / "data" / "scenarios" / "first_tool"
RESULTS = Path(__file__).parent / "results" / "router.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", action="store_true", help="router off (tool_choice=model)")
    parser.add_argument("--split", choices=["dev", "heldout"], action="append")
    parser.add_argument("--model", default="llama")
    args = parser.parse_args()
    mode = "model" if args.off else "router"
    rows = run_first_tool(
        load_first_tool_tables([TABLES]),
        data_dir=REPO / "data",
        model=args.model,
        params={"planner.tool_choice": mode},
        splits=tuple(args.split or ("dev", "heldout")),
    )
    summary = first_tool_summary(rows)
    print(f"tool_choice={mode} model={args.model} cpus={os.cpu_count()}")
    print(first_tool_report(summary))
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(
            file, fieldnames=["when", "machine", "tool_choice", "model", *summary[0].keys()]
        )
        if new:
            writer.writeheader()
        when = datetime.now(UTC).isoformat(timespec="seconds")
        for item in summary:
            writer.writerow({
                "when": when,
                "machine": platform.machine(),
                "tool_choice": mode,
                "model": args.model,
                **item,
            })  # fmt: skip


if __name__ == "__main__":
    main()
