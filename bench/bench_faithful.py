"""Answers on the embedded model: how often they contradict or invent beyond the tools, and how
long an approval takes to answer (issue 49's targets; figures, not pass/fail: ``make bench``).

1. **unfaithful answers**: the shipped scenarios (``data/scenarios/*.yaml``) run on the
   embedded model (``--model llama``: each sample agent's own config, so the ``small_model``
   preset of its ``for_embedded_model`` section), every run scanned by the built-in
   ``unfaithful_answer`` scanner; prints the runs, the answers read, the findings by kind
   (contradictions — "none" said when a tool returned items — are the target: 0).
2. **approve → answer**: notebook 02's flow on desk-001 (connect an exchange account, the
   consent, Approve through ``Agent.decide``), timed from the decision to the turn's result,
   ``--approvals`` times; the median is the figure (target ≤ 10 s).

Rows are appended to ``bench/results/faithful.csv``.

    python bench/bench_faithful.py                 # both
    python bench/bench_faithful.py --approvals 5 --no-scenarios
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import math
import os
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agentkit import Agent
from agentkit.eval import run_eval
from agentkit.eval.scanners import ScanContext, unfaithful_answer
from agentkit.eval.transcript import load_transcripts

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "faithful.csv"
KEY = "AKEY-0123456789abcd"
SECRET = "SKEY-9876543210wxyz"


def _root(into: Path) -> Path:
    shutil.copytree(
        REPO / "data" / "agents",
        into / "agents",
        ignore=shutil.ignore_patterns("conversations", ".*.lock"),
    )
    return into


def scenarios(model: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as scratch:
        root = _root(Path(scratch))
        frame = run_eval(
            sorted(str(p) for p in (REPO / "data" / "scenarios").glob("*.yaml")),
            model=model,
            data_dir=root,
            progress=False,
        )
    answers = findings = contradictions = 0
    kinds: dict[str, int] = {}
    for transcript in load_transcripts(frame):
        if transcript is None:
            continue
        answers += sum(1 for turn in transcript.turns if turn.events)
        for finding in unfaithful_answer(transcript, ScanContext()):
            findings += 1
            kind = finding.sentence.split(" ")[0:2]
            kinds[" ".join(kind)] = kinds.get(" ".join(kind), 0) + 1
            contradictions += "but a tool returned them" in finding.sentence
    return {
        "runs": len(frame),
        "answers": answers,
        "findings": findings,
        "contradictions": contradictions,
        "rate": round(findings / answers, 4) if answers else 0.0,
        "detail": "; ".join(f"{k}: {v}" for k, v in sorted(kinds.items())),
    }


async def _approve_once(root: Path, model: str) -> float:
    agent = Agent.open("desk-001", data_dir=root, model=model)  # its embedded-model preset
    try:
        text = f"connect my binance account main with key {KEY} and secret {SECRET}"
        conversation = ""
        approval = ""
        async for event in agent.send_message(None, text):
            if event.type == "session":
                conversation = event.conversation_id
            if event.type == "ask_user" and event.kind == "confirmation":
                approval = event.approval_id
        if not approval:
            return float("nan")
        started = time.perf_counter()
        async for event in agent.adecide(conversation, approval, "approve"):
            if event.type == "result":
                break
        return time.perf_counter() - started
    finally:
        await agent.aclose()


def approvals(model: str, times: int) -> list[float]:
    taken = []
    for _ in range(times):
        with tempfile.TemporaryDirectory() as scratch:
            taken.append(asyncio.run(_approve_once(_root(Path(scratch)), model)))
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama")
    parser.add_argument("--approvals", type=int, default=3)
    parser.add_argument("--no-scenarios", action="store_true")
    args = parser.parse_args()
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    load = os.getloadavg()[0]
    if args.approvals:
        taken = [t for t in approvals(args.model, args.approvals) if not math.isnan(t)]
        median = statistics.median(taken) if taken else float("nan")
        print(f"approve -> answer: median {median:.2f} s over {len(taken)} ({taken})")
        rows.append({"at": at, "figure": "approve_to_answer_s", "value": round(median, 3),
                     "n": len(taken), "detail": "", "load_avg_1min": load})  # fmt: skip
    if not args.no_scenarios:
        figures = scenarios(args.model)
        print(f"unfaithful answers: {figures}")
        for name in ("findings", "contradictions", "rate"):
            rows.append({"at": at, "figure": f"unfaithful_{name}", "value": figures[name],
                         "n": figures["answers"], "detail": figures["detail"],
                         "load_avg_1min": load})  # fmt: skip
    new = not OUT.exists()
    with OUT.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["at"])
        if new:
            writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
