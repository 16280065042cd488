"""Scoring by BFCL's own checkers, never by ours.

A run is handed to the same per-entry evaluation BFCL's ``eval_runner`` applies to a model's
result file, with the decoder of the mode the run was in:

* **function calling** (agentkit's runs): the calls the agent made, turn by turn, in the form
  BFCL's function-calling handlers record (``[{name: arguments as JSON text}]`` per step) and
  decode (``json.loads``; ``convert_to_function_call`` for execution);
* **prompt mode** (the model-alone baseline): the model's text, decoded by BFCL's prompting
  decoder (``default_decode_ast_prompting`` / ``default_decode_execute_prompting``).

Then: the AST checker for single-turn categories, "no call" for irrelevance (a call for
relevance), the state-and-response checker for multi-turn categories (it re-runs the calls on
fresh instances of BFCL's simulated APIs, beside the gold calls), and string match for the
memory set. ``error_type`` is BFCL's own error kind (``value_error:string``,
``simple_function_checker:missing_required``, ``multi_turn:instance_state_mismatch`` …).

BFCL's multi-turn executor keeps the API instances it makes in its module's globals under a
name built from the model name and item id, for the next turn of the same item. Each check
here runs under a model name of its own and removes its instances afterwards, so a repeat of
the same item starts from the item's initial state again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from agentkit.eval.bfcl._package import bfcl_module
from agentkit.eval.bfcl.catalog import BfclItem

__all__ = [
    "BfclScore",
    "Call",
    "score_calls",
    "score_answer",
    "score_text",
]

_MODEL = "agentkit"
_ERROR_CHARS = 500


@dataclass(frozen=True)
class Call:
    """One call a turn made: BFCL's function name and the arguments given."""

    name: str
    arguments: dict[str, JsonValue]


@dataclass(frozen=True)
class BfclScore:
    """BFCL's verdict: ``valid``, its ``error_type`` ("" when valid) and what it said."""

    valid: bool
    error_type: str = ""
    error: str = ""


class _FunctionCallingDecoder:
    """What BFCL's function-calling handlers decode (its OpenAI handler's FC branch)."""

    def decode_ast(self, result: Any, language: Any = None, has_tool_call_tag: bool = False) -> Any:  # noqa: ANN401
        decoded = []
        for invoked in result:
            name = next(iter(invoked))
            decoded.append({name: json.loads(invoked[name])})
        return decoded

    def decode_execute(self, result: Any, has_tool_call_tag: bool = False) -> Any:  # noqa: ANN401
        return bfcl_module("model_handler.utils").convert_to_function_call(result)


class _PromptDecoder:
    """What BFCL's prompting handlers decode: the model's text as Python-style calls."""

    def decode_ast(self, result: Any, language: Any = None, has_tool_call_tag: bool = False) -> Any:  # noqa: ANN401
        utils = bfcl_module("model_handler.utils")
        enums = bfcl_module("constants.enums")
        return utils.default_decode_ast_prompting(
            result, language or enums.ReturnFormat.PYTHON, has_tool_call_tag
        )

    def decode_execute(self, result: Any, has_tool_call_tag: bool = False) -> Any:  # noqa: ANN401
        return bfcl_module("model_handler.utils").default_decode_execute_prompting(
            result, has_tool_call_tag
        )


def _step(calls: Sequence[Call]) -> list[dict[str, str]]:
    return [{call.name: json.dumps(call.arguments, ensure_ascii=False)} for call in calls]


def _verdict(result: dict[str, Any]) -> BfclScore:
    if result.get("valid"):
        return BfclScore(valid=True)
    error = result.get("error")
    if isinstance(error, dict):  # multi-turn: {"error_message", "error_type", "details"}
        kind = str(error.get("error_type", ""))
        said = error.get("error_message", "")
    else:
        kind = str(result.get("error_type", ""))
        said = error
    text = "; ".join(map(str, said)) if isinstance(said, list) else str(said or "")
    return BfclScore(valid=False, error_type=kind, error=text[:_ERROR_CHARS])


def _languages(item: BfclItem) -> tuple[Any, Any]:
    enums = bfcl_module("constants.enums")
    if item.language == "java":
        return enums.Language.JAVA, enums.ReturnFormat.JAVA
    if item.language == "javascript":
        return enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT
    return enums.Language.PYTHON, enums.ReturnFormat.PYTHON


def score_calls(item: BfclItem, turns: Sequence[Sequence[Sequence[Call]]]) -> BfclScore:
    """Score the calls of a function-calling run: per turn, per step, the calls made."""
    decoder = _FunctionCallingDecoder()
    if item.kind == "multi_turn":
        return _multi_turn(item, [[_step(step) for step in turn] for turn in turns], decoder)
    if item.kind == "memory":
        raise ValueError("a memory item is scored on its answer (score_answer)")
    first = [call for step in (turns[0] if turns else []) for call in step]
    return _single_turn(item, _step(first), decoder)


def score_text(item: BfclItem, turns: Sequence[Sequence[str]]) -> BfclScore:
    """Score a prompt-mode run: per turn, the model's text at each step."""
    decoder = _PromptDecoder()
    if item.kind == "multi_turn":
        return _multi_turn(item, [list(turn) for turn in turns], decoder)
    if item.kind == "memory":
        return score_answer(item, turns[-1][-1] if turns and turns[-1] else "")
    return _single_turn(item, turns[0][-1] if turns and turns[0] else "", decoder)


def score_answer(item: BfclItem, answer: str) -> BfclScore:
    """A memory question's answer, by BFCL's string match."""
    checker = bfcl_module("eval_checker.agentic_eval.agentic_checker")
    accepted = item.ground_truth if isinstance(item.ground_truth, list) else [item.ground_truth]
    return _verdict(checker.agentic_checker(answer, [str(a) for a in accepted]))


def _runner() -> Any:  # noqa: ANN401 - bfcl_eval.eval_checker.eval_runner
    return bfcl_module("eval_checker.eval_runner")


def _single_turn(item: BfclItem, result: Any, decoder: object) -> BfclScore:  # noqa: ANN401
    runner = _runner()
    entry = item.entry()
    if item.kind in ("irrelevance", "relevance"):
        verdict = runner._evaluate_single_relevance_entry(
            decoder, item.id, result, entry, _MODEL, item.category
        )
        return _verdict(verdict)
    language, return_format = _languages(item)
    verdict = runner._evaluate_single_ast_entry(
        decoder,
        item.id,
        result,
        item.ground_truth,
        entry,
        _MODEL,
        item.category,
        language=language,
        return_format=return_format,
        has_tool_call_tag=False,
    )
    return _verdict(verdict)


def _multi_turn(item: BfclItem, result: list[list[Any]], decoder: object) -> BfclScore:
    runner = _runner()
    name = f"{_MODEL}{uuid.uuid4().hex}"
    kind: Literal["multi_turn"] = "multi_turn"
    assert item.kind == kind
    try:
        verdict = runner._evaluate_single_multi_turn_entry(
            decoder, item.id, result, item.ground_truth, item.entry(), name, item.category
        )
    finally:
        _forget(name)
    return _verdict(verdict)


def _forget(model_name: str) -> None:
    """Remove the API instances BFCL's executor kept for *model_name*."""
    utils = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    kept = vars(utils)
    for key in [key for key in kept if key.startswith(model_name)]:
        del kept[key]
