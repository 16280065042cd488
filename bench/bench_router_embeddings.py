"""The router's meaning signal, alone: which embedder tells the right tool, and "no tool"?

Issue 36 item 5. For each request the tools are scored by the semantic signal as the router
computes it (:mod:`agentkit.planning.tool_semantics`: the best cosine between the request and
one of a tool's texts, centred on the toolset's mean) with each embedder:

* ``wordllama`` — the sentence embedder whose weights ship in its wheel
  (``planner.router_embedder: "wordllama"``, the ``router`` extra);
* ``model`` — the embedded model's own embeddings (SmolLM2-135M, mean-pooled; ``--model``);
* ``lexical`` — the router's word ranking alone, for scale.

Figures: **top-1 accuracy** (the best-scored tool is the gold call's) on BFCL ``multiple`` and
``live_multiple`` (seeded samples) and on the project's held-out first-tool rows that expect a
tool; and for "no tool" the **AUC** of the best *raw* cosine separating BFCL's relevant items
(``multiple``, ``live_multiple``) from ``irrelevance`` / ``live_irrelevance`` (1.0: a threshold
separates them perfectly; 0.5: chance). No model generates anything; appended to
``bench/results/router_embeddings.csv`` as each set ends (a run cut short keeps what it
measured); each distinct text is embedded once.

    python bench/bench_router_embeddings.py --limit 50 --seed 0 [--model] [--signals model]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentkit import testing
from agentkit.eval.bfcl import load_suite
from agentkit.eval.bfcl.gold import gold_turns
from agentkit.eval.bfcl.toolset import ItemToolset, find_item, tool_names
from agentkit.eval.first_tool import load_first_tool_tables
from agentkit.planning.tool_ranking import rank_tools
from agentkit.planning.tool_semantics import SemanticIndex, tool_texts, wordllama_embedder
from agentkit.tools import ToolRegistry

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "router_embeddings.csv"
TABLES = REPO / "data" / "scenarios" / "first_tool"
Embed = Callable[[Sequence[str]], list[list[float]]]


def _unit(v: Sequence[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def scores(embed: Embed, tools: ToolRegistry, text: str) -> tuple[dict[str, float], float]:
    """Per tool the centred semantic score, and the best raw cosine."""
    owners, texts = [], []
    for name in tools.names():
        for t in tool_texts(tools.get(name)):
            owners.append(name)
            texts.append(t)
    vectors = embed([*texts, " ".join(text.split())])
    index = SemanticIndex.build(tools.names(), owners, vectors[:-1])
    request = _unit(vectors[-1])
    raw = max(sum(a * b for a, b in zip(request, _unit(v), strict=True)) for v in vectors[:-1])
    return index.scores(vectors[-1]), raw


def lexical(tools: ToolRegistry, text: str) -> str:
    ranked = [r for r in rank_tools(tools, text) if r.score > 0]
    return ranked[0].name if ranked else "none"


def bfcl_rows(category: str, limit: int, seed: int) -> list[tuple[str, ToolRegistry, str]]:
    """(request, tools, gold tool or "none") per sampled item."""
    rows = []
    for scenario in load_suite(f"bfcl:{category}", limit=limit, seed=seed):
        item = find_item(scenario.bfcl.item)
        tools = ToolRegistry(ItemToolset(item).tools())
        ours = {bfcl: name for name, bfcl in tool_names(item.functions).items()}
        turns = gold_turns(item) if item.kind != "irrelevance" else [[]]
        gold = ours.get(turns[0][0].name, "?") if turns and turns[0] else "none"
        rows.append((scenario.turns[0].user or "", tools, gold))
    return rows


def heldout_rows() -> list[tuple[str, ToolRegistry, str]]:
    """The first-tool tables' held-out rows, each with its agent's tools."""
    from agentkit.agent import Agent

    rows = []
    for table in load_first_tool_tables([TABLES]):
        root = Path(tempfile.mkdtemp(prefix="bench-embed-"))
        skip = shutil.ignore_patterns("conversations", "logs", "*.lock")
        shutil.copytree(REPO / "data" / "agents" / table.agent, root / "agents" / table.agent,
                        ignore=skip)  # fmt: skip
        agent = Agent.open(table.agent, data_dir=root, model="scripted")
        try:
            tools = agent.tools
            rows += [(r.text, tools, r.expect) for r in table.rows if r.split == "heldout"]
        finally:
            asyncio.run(agent.aclose())
    return rows


def auc(positive: list[float], negative: list[float]) -> float | None:
    if not positive or not negative:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return round(wins / (len(positive) * len(negative)), 3)


class Cached:
    """An embedder that embeds each distinct text once (the held-out rows share their agent's
    tool texts; BFCL items repeat descriptions), so a slow embedder only pays for new texts."""

    def __init__(self, embed: Embed) -> None:
        self.embed = embed
        self.known: dict[str, list[float]] = {}

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.embed(missing), strict=True))
        return [self.known[t] for t in texts]


def write(rows: list[dict[str, Any]]) -> None:
    """Print *rows* and append them to the results CSV (as each set ends: a cut run keeps
    what it measured)."""
    for row in rows:
        print(json.dumps(row), flush=True)
    fresh = not RESULTS.exists()
    with RESULTS.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        if fresh:
            writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", action="store_true", help="also the embedded model's vectors")
    parser.add_argument("--signals", default="lexical,wordllama,model",
                        help="which signals (model only with --model)")  # fmt: skip
    args = parser.parse_args(argv)
    wanted = [s for s in args.signals.split(",") if s]
    embedders: dict[str, Embed] = {}
    if "wordllama" in wanted:
        embedders["wordllama"] = Cached(wordllama_embedder().vectors)
    if args.model and "model" in wanted:
        from agentkit.models.spec import create_model

        with testing.allow_model_requests():
            llama: Any = create_model("llama")
        embedders["model"] = Cached(lambda texts: asyncio.run(llama.embed(list(texts))))
    sets = {c: bfcl_rows(c, args.limit, args.seed) for c in
            ("multiple", "irrelevance", "live_multiple", "live_irrelevance")}  # fmt: skip
    sets["heldout"] = heldout_rows()
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name in [n for n in wanted if n == "lexical" or n in embedders]:
        started = time.perf_counter()
        raws: dict[str, list[float]] = {}
        for label, rows in sets.items():
            right = total = 0
            for number, (text, tools, gold) in enumerate(rows, 1):
                if name == "lexical":
                    chosen = lexical(tools, text)
                else:
                    with testing.allow_model_requests():
                        by_tool, raw = scores(embedders[name], tools, text)
                    chosen = max(by_tool, key=lambda t: by_tool[t])
                    raws.setdefault(label, []).append(raw)
                if gold not in ("none", "?"):
                    total += 1
                    right += chosen == gold
                if number % 10 == 0:
                    took = time.perf_counter() - started
                    print(f"{name} {label} {number}/{len(rows)} ({took:.0f} s)", file=sys.stderr,
                          flush=True)  # fmt: skip
            if total:
                top1 = round(right / total, 3)
                write([{"at": at, "host": platform.node(), "signal": name, "set": label,
                        "measure": "top1", "n": total, "value": top1}])  # fmt: skip
        relevant = raws.get("multiple", []) + raws.get("live_multiple", [])
        for label in ("irrelevance", "live_irrelevance") if raws else ():
            value = auc(relevant, raws.get(label, []))
            write([{"at": at, "host": platform.node(), "signal": name,
                    "set": f"{label} vs relevant", "measure": "auc_raw_cosine",
                    "n": len(raws.get(label, [])), "value": value}])  # fmt: skip
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
