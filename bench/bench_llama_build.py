"""The portable llama.cpp build against a native one: tokens/s and time to first token.

    python bench/bench_llama_build.py PYTHON [PYTHON …]

Each PYTHON is an interpreter whose environment has llama-cpp-python installed (for example
.venv/bin/python, with the portable build of scripts/install-llama.sh, and a second venv with
pip's default native build). Each is run in turn, in a child process, on the shipped
SmolLM2-135M GGUF: a ~400-token prompt (prompt processing, the batched matmul kernels) and
128 generated tokens, five times after a warm-up, in three child processes per build
interleaved with the other builds'; the medians are printed and appended to
bench/results/llama_build.csv with the build's reported CPU features.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "llama_build.csv"
ROUNDS = 5
REPEATS = 3

CHILD = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama

llama = Llama(model_path=sys.argv[1], n_ctx=2048, seed=7, verbose=False)
filler = " ".join(f"Fact {i}: the harbour light is checked every evening." for i in range(40))
prompt = filler + " Now write a long story about the harbour."
prompt_tokens = len(llama.tokenize(prompt.encode()))
rounds = []
for round_ in range(int(sys.argv[2]) + 1):
    llama.reset()
    start = time.perf_counter()
    first = None
    count = 0
    for chunk in llama.create_completion(prompt, max_tokens=128, temperature=0.0, stream=True,
                                         repeat_penalty=1.3):
        if first is None:
            first = time.perf_counter() - start
        count += 1
    total = time.perf_counter() - start
    if round_:  # the first round warms caches
        rounds.append({"first_token_s": first, "decode_tok_s": (count - 1) / (total - first),
                       "tokens": count})
info = llama_cpp.llama_print_system_info()
print(json.dumps({"rounds": rounds, "prompt_tokens": prompt_tokens,
                  "system_info": info.decode() if isinstance(info, bytes) else str(info)}))
"""


def gguf_path() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from agentkit.models.llama import default_gguf_path

    return str(default_gguf_path())


def run_child(python: str, model: str) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-c", CHILD, model, str(ROUNDS)],
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},  # as agentkit's model worker runs
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def summarise(python: str, reports: list[dict[str, Any]]) -> dict[str, object]:
    report = reports[0]
    rounds = [r for each in reports for r in each["rounds"]]
    return {
        "python": python,
        "system_info": report["system_info"].strip(),
        "prompt_tokens": report["prompt_tokens"],
        "first_token_ms": round(1000 * statistics.median(r["first_token_s"] for r in rounds), 1),
        "decode_tok_s": round(statistics.median(r["decode_tok_s"] for r in rounds), 1),
    }


def main() -> None:
    pythons = sys.argv[1:] or [sys.executable]
    model = gguf_path()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    # interleaved, so a noisy neighbour costs every build alike
    reports: dict[str, list[dict[str, Any]]] = {python: [] for python in pythons}
    for _ in range(REPEATS):
        for python in pythons:
            reports[python].append(run_child(python, model))
    rows = [{"run": stamp, **summarise(python, reports[python])} for python in pythons]
    for row in rows:
        print(
            f"{row['python']}: first token {row['first_token_ms']} ms "
            f"({row['prompt_tokens']}-token prompt), decode {row['decode_tok_s']} tok/s\n"
            f"    {row['system_info']}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
