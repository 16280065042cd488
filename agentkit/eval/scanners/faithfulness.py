"""The ``unfaithful_answer`` scanner: an answer that contradicts or invents beyond what the
turn's tools returned.

Why a rule, not a judge: the failures it looks for are mechanical and common on small models —
"none" said when a tool returned items, a number or a name in the answer that no tool result,
call or user message holds, a template placeholder left in (*[Your Name]*) — and a rule finds
them on every run for free. It reads only turns that ran a tool (placeholders: every turn), and
never the planner's own live-state re-reads as the turn's subject.
"""

from __future__ import annotations

import json
import re

from agentkit import language
from agentkit.eval.reading import TurnRead, read_run
from agentkit.eval.scanners.findings import Finding, ScanContext
from agentkit.eval.transcript import Transcript

__all__ = ["unfaithful_answer"]

#: a capitalised word inside a sentence (not its first word): a name, when no source holds it
_NAME = re.compile(r"(?<=[a-z0-9,;:] )([A-Z][a-zA-Z]+(?:[ -][A-Z][a-zA-Z]+)*)")
#: a number written in digits, on its own (not inside a name: *gpt-4o*, *ex-1*)
_NUMBER = re.compile(r"(?<![\w.\-/])\d[\d,]*(?:\.\d+)?(?![A-Za-z_\d-])")
#: what a "none" claim is about: *no items*, *no notes yet*
_NONE_OF = re.compile(r"\bno (\w+)", re.IGNORECASE)


def _lists(output: str) -> dict[str, int]:
    """The lists a result holds, by their key (``""`` for a bare list), with their lengths."""
    try:
        value = json.loads(output)
    except ValueError:
        return {}
    if isinstance(value, list):
        return {"": len(value)}
    if isinstance(value, dict):
        return {k: len(v) for k, v in value.items() if isinstance(v, list)}
    return {}


def _stem(word: str) -> str:
    return language.normalize(word).removesuffix("s")


def _contradicts(claim: str, results: list[str]) -> bool:
    """A "none" *claim* that the results deny: a list of what it names holds items, or
    (a claim naming nothing) every list returned holds items."""
    lists: dict[str, int] = {}
    for result in results:
        lists.update(_lists(result))
    named = _NONE_OF.search(claim)
    if named is not None:
        about = _stem(named.group(1))
        return any(count and _stem(key) == about for key, count in lists.items())
    return bool(lists) and all(lists.values())


def _finding(turn: int, event: int, sentence: str, severity: str = "error") -> Finding:
    return Finding(
        kind="unfaithful_answer",
        severity=severity,  # type: ignore[arg-type]  # one of the literals
        turn=turn,
        event=event,
        event_type="result",
        sentence=sentence,
    )


def _read_turn(turn: TurnRead) -> tuple[list[str], str]:
    """The turn's tool results (live-state re-reads aside) and everything its answer may draw
    on (results, calls, the user's message)."""
    grounds = [turn.turn.said]
    results: list[str] = []
    for call in turn.calls:
        grounds += [call.name, json.dumps(call.arguments, ensure_ascii=False)]
        if call.result is not None:
            grounds.append(call.result.output)
            if not call.live:
                results.append(call.result.output)
    return results, "\n".join(grounds)


def _problems(text: str, results: list[str], source: str) -> list[tuple[str, str]]:
    """What is wrong with the answer *text*: ``(severity, sentence)`` each."""
    found: list[tuple[str, str]] = []
    placeholder = language.pattern("placeholders")
    left = placeholder.search(text) if placeholder is not None else None
    if left is not None:
        found.append(("error", f"a template placeholder: {left.group(0)!r}"))
    if not results:
        return found
    none_claim = language.pattern("none_claims")
    said_none = none_claim.search(text) if none_claim is not None else None
    if said_none is not None and _contradicts(said_none.group(0), results):
        found.append(("error", f"says {said_none.group(0)!r} but a tool returned them"))
    numbers = language.numbers_in(source)
    invented = [w for w in _NUMBER.findall(text) if language.parse_number(w) not in numbers]
    if invented:
        found.append(("error", f"the number {invented[0]} is in no result"))
    folded = language.normalize(source)
    names = [n for n in _NAME.findall(text) if language.normalize(n) not in folded]
    if names:
        found.append(("warning", f"the name {names[0]!r} is in no result, call or message"))
    return found


def unfaithful_answer(transcript: Transcript, context: ScanContext) -> list[Finding]:
    """An answer that contradicts the turn's tool results ("none" when they hold items),
    invents beyond them (a number or a name no result, call or user message holds) or keeps a
    template placeholder."""
    del context
    found: list[Finding] = []
    said: list[str] = []  # what the user said so far: it grounds a name or a number too
    for turn in read_run(transcript).turns:
        results, source = _read_turn(turn)
        said.append(turn.turn.said)
        result = turn.result
        if result is None or result.status != "completed":
            continue
        at = next(m.position for m in turn.moments if m.event is result)
        for severity, sentence in _problems(result.text, results, "\n".join([source, *said])):
            found.append(_finding(turn.number, at, sentence, severity))
    return found
