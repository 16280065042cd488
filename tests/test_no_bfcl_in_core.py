"""Nothing in agentkit is tuned to BFCL's items: no BFCL item id and no function name of its
dataset appears in ``agentkit/`` (code, prompt templates, docs), its BFCL package included;
the items are read from the pinned package at run time."""

from __future__ import annotations

import re
from pathlib import Path

from agentkit.eval.bfcl import CATEGORIES, load_items

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "agentkit"
#: names BFCL's functions share with the Python and OpenTelemetry APIs agentkit itself calls
#: (agentkit's own method and the libraries' functions, not BFCL's)
SHARED = {
    "math.sqrt": "Python's math module",
    "statistics.median": "Python's statistics module",
    "create_histogram": "OpenTelemetry's Meter API",
    "send_message": "Agent.send_message, agentkit's own API (the seed's name)",
    "get_response": "tau2's Environment.get_response, the API its toolset calls",
}


def bfcl_words() -> tuple[set[str], set[str]]:
    """BFCL's item ids, and its function names specific enough to be a sign of tuning (six
    characters or more with an underscore, a dot or a camel hump)."""
    ids: set[str] = set()
    names: set[str] = set()
    for category in CATEGORIES:
        for item in load_items(category):
            ids.add(item.id)
            for doc in [*item.functions, *(d for docs in item.held_back.values() for d in docs)]:
                names.add(str(doc["name"]))
    specific = {
        name for name in names
        if len(name) >= 6 and ("_" in name or "." in name or re.search("[a-z][A-Z]", name))
    }  # fmt: skip
    return ids, specific


def test_no_bfcl_item_id_or_function_name_in_agentkit() -> None:
    ids, names = bfcl_words()
    assert len(ids) > 4000 and len(names) > 1500
    assert {"calculate_triangle_area", "simple_python_0", "multi_turn_base_0"} <= names | ids
    words = (ids | names) - set(SHARED)
    # every identifier-like token of a line (dotted names and ids with "-" too), and its tails
    token = re.compile(r"[A-Za-z_][\w.-]*")
    files = [p for p in CORE.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".json")]
    assert any(p.parts[-2] == "bfcl" for p in files)  # the BFCL package itself is scanned
    found: list[str] = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in token.finditer(line):
                text = match.group(0).rstrip(".-")
                parts = text.split(".")
                tails = {".".join(parts[i:]) for i in range(len(parts))} | set(parts)
                for hit in sorted(tails & words):
                    found.append(f"{path.relative_to(REPO)}:{number}: {hit}")
    assert not found, "BFCL items or function names in agentkit:\n" + "\n".join(found)


def test_the_bfcl_agent_names_no_item() -> None:
    ids, names = bfcl_words()
    folder = REPO / "data" / "agents" / "bfcl-001"
    text = " ".join(p.read_text(encoding="utf-8") for p in folder.glob("*.*"))
    assert not [word for word in ids | names if re.search(rf"\b{re.escape(word)}\b", text)]
