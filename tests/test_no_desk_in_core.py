"""The desk is one example toolset, not the core: no desk tool name or desk noun lives in
``agentkit/`` (code, prompt templates, docs). The desk's own package is ``agentkit_desk``."""

from __future__ import annotations

import re
from pathlib import Path

from agentkit_desk import DeskDatabase, desk_tools

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "agentkit"
DESK_NOUNS = ("desk", "trader", "traders", "exchange", "exchanges", "binance", "okx", "bybit")
DESK_WORDS_ZH = ("交易所", "交易员")


def desk_tool_names() -> set[str]:
    return set(desk_tools(DeskDatabase(Path("unused.db"))).names())


def test_no_desk_tool_name_or_noun_in_agentkit() -> None:
    names = desk_tool_names()
    assert {"create_trader", "get_exchange_configs", "set_preference"} <= names
    words = re.compile(
        r"\b(" + "|".join(map(re.escape, sorted(names | set(DESK_NOUNS)))) + r")\b", re.IGNORECASE
    )
    found: list[str] = []
    files = [p for p in CORE.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".json")]
    assert len(files) > 50
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            hits = {match.group(0) for match in words.finditer(line)}
            hits |= {word for word in DESK_WORDS_ZH if word in line}
            if hits:
                found.append(f"{path.relative_to(REPO)}:{number}: {sorted(hits)}: {line.strip()}")
    assert not found, "desk words in the core:\n" + "\n".join(found)


def test_the_desk_agents_name_the_desk_toolset() -> None:
    for agent in ("desk-001", "desk-local-001"):
        text = (REPO / "data" / "agents" / agent / "config.json").read_text(encoding="utf-8")
        assert '"python": "agentkit_desk:toolset"' in text
        assert "live_state_keywords" in text


def test_the_consent_question_has_no_domain_phrase() -> None:
    """The question asked before a side-effecting call is the tool's words in a neutral frame:
    no desk noun, and no "configuration" (a desk phrase once shown for notes and files)."""
    from agentkit.planning.consent import consent_question
    from agentkit.tools import tool

    @tool(side_effect=True)
    def water_plant(plant: str) -> str:
        """Water one plant."""
        return plant

    domain = re.compile(r"\b(" + "|".join([*DESK_NOUNS, "configuration", "config"]) + r")\b", re.I)
    for language in ("en", "zh"):
        said = consent_question("water_plant", {"plant": "fern"}, water_plant.bind(), language)
        assert "water_plant" in said and "fern" in said and "Water one plant." in said
        assert not domain.search(said), said
        assert not any(word in said for word in (*DESK_WORDS_ZH, "配置")), said
    for path in (CORE / "planning" / "consent.py", CORE / "planning" / "steps.py"):
        assert "configuration" not in path.read_text(encoding="utf-8").casefold(), path
