"""The regression gate on large tables: ``agentkit compare A B --gate`` on two tables of 10,000
runs each (figures, not pass/fail; the target is 2 s).

Two results tables are made with every column of a real one (:class:`agentkit.eval.RunRow`'s,
through ``to_frame``): 2,500 scenarios x 4 repeats — 85% of the scenarios pass every repeat,
10% fail every one, 5% are flaky (each repeat a coin) — B with 3% of the stable passing
scenarios broken in every repeat, and
a short transcript per run (a user turn and an answer), written as parquet. Then:

* ``cli_s``: the command as a CI job runs it, in a fresh process (the interpreter, the
  imports of pandas and scipy, reading both tables, pairing 10,000 runs, McNemar, the
  bootstrap's 10,000 resamples, the per-scenario rule, printing), best of 3;
* ``cli_cpu_s``: that process's CPU time (user + system), which a busy shared machine
  inflates less than the wall time;
* ``gate_s``: :func:`agentkit.eval.gate` alone on the loaded tables, in this process, best of 3.

Figures are appended to ``bench/results/gate.csv``.

    python bench/bench_gate.py
    python bench/bench_gate.py --runs 2000
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "gate.csv"
REPEATS = 4


def _table(runs: int, broken: float, seed: int) -> object:
    """A results table of *runs* runs (every column), *broken*: the share of the stably passing
    scenarios made failing."""
    from agentkit.eval import RunRow, Transcript, UserTurn, to_frame
    from agentkit.eval.transcript import RunState
    from agentkit.events import ResultEvent
    from agentkit.memory import TaskState

    chooser = random.Random(seed)
    base = random.Random(7)  # the same scenarios' fates for both tables
    fates: dict[str, str] = {}
    rows = []
    for index in range(runs):
        scenario, repeat = f"s{index // REPEATS:05d}", index % REPEATS
        if scenario not in fates:
            draw = base.random()
            fate = "pass" if draw < 0.85 else "fail" if draw < 0.95 else "flaky"
            if fate == "pass" and chooser.random() < broken:
                fate = "fail"
            fates[scenario] = fate
        fate = fates[scenario]
        passed = fate == "pass" or (fate == "flaky" and chooser.random() < 0.5)
        transcript = Transcript(
            run=f"{scenario}--p0" + (f"--r{repeat}" if repeat else ""),
            scenario=scenario,
            turns=[
                UserTurn(
                    number=1,
                    said="which accounts do I have?",
                    events=[
                        ResultEvent(
                            conversation_id="conv-1",
                            message_id="msg-1",
                            text="One account: binance main.",
                            status="completed",
                        )
                    ],
                )
            ],
            final=RunState(status="completed", task_state=TaskState()),
        )
        rows.append(
            RunRow(
                scenario=scenario,
                title="",
                language="en",
                agent="desk-001",
                tags="bench",
                point=0,
                repeat=repeat,
                params={"planner.strategy": "plan_replan"},
                model="openai:gpt-4o-mini",
                user_model="",
                passed=passed,
                outcome="passed" if passed else "failed",
                expectations={"status": passed},
                checks=1,
                checks_failed=0 if passed else 1,
                failures="" if passed else "run: status FAILED",
                error="",
                turns=1,
                steps=2,
                tool_calls=1,
                tools="get_exchange_configs",
                questions=0,
                consents=0,
                model_calls=3,
                input_tokens=900,
                output_tokens=60,
                cached_tokens=0,
                cost_usd=0.000171,
                cost_note="",
                compressions=0,
                messages_before=None,
                messages_after=None,
                tokens_before=None,
                tokens_after=None,
                compression_strategy="",
                facts_ungrounded=0,
                facts_total=None,
                facts_kept=None,
                fact_retention=None,
                final_status="completed",
                result_status="completed",
                answer="One account: binance main.",
                errors="",
                budget_reason="",
                sim_turns=0,
                sim_stopped_by="",
                sim_model_calls=0,
                sim_tokens=0,
                sim_user_ok=None,
                sim_user_issues="",
                attempts=1,
                transport_retries=0,
                source=None,
                latency_ms=900.0,
                wall_ms=950.0,
                trace_id="",
                span_id="",
                judgements=(),
                transcript=transcript,
            )
        )
    return to_frame(rows, params=["planner.strategy"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs per table")
    parser.add_argument("--results", type=Path, default=RESULTS, help="CSV file to append to")
    args = parser.parse_args()

    from agentkit.eval import gate, load_results, save_results

    with tempfile.TemporaryDirectory(prefix="bench-gate-") as folder:
        a_path, b_path = Path(folder) / "a.parquet", Path(folder) / "b.parquet"
        save_results(_table(args.runs, 0.0, 1), a_path)  # type: ignore[arg-type]
        save_results(_table(args.runs, 0.03, 2), b_path)  # type: ignore[arg-type]
        script = str(Path(sys.executable).parent / "agentkit")
        command = [script, "compare", str(a_path), str(b_path), "--gate"]
        cli: list[float] = []
        cpu: list[float] = []
        status = 0
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            cli.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            status = done.returncode
        a, b = load_results(a_path), load_results(b_path)
        alone: list[float] = []
        for _ in range(3):
            started = time.perf_counter()
            judged = gate(a, b)
            alone.append(time.perf_counter() - started)
    row = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "load": round(os.getloadavg()[0], 1),
        "runs": args.runs,
        "cli_s": round(min(cli), 3),
        "cli_cpu_s": round(min(cpu), 3),
        "gate_s": round(min(alone), 3),
        "exit_status": status,
        "regressions": len(judged.regressions),
        "flaky": len(judged.flaky),
    }
    print(", ".join(f"{key} {value}" for key, value in row.items()))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    new_file = not args.results.exists()
    with open(args.results, "a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new_file:
            writer.writeheader()
        writer.writerow(row)
    print(f"appended to {args.results}")


if __name__ == "__main__":
    main()
