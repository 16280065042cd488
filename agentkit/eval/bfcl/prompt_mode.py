"""The model-alone baseline: the model asked the way BFCL's prompt mode asks it.

What BFCL does for a model without native function calling (its prompting handlers), step for
step: BFCL's default system prompt (``system_prompt_pre_processing_chat_model``: the task, the
call format ``[func(a=1), …]``, the functions as JSON) before the item's messages; the
model's text decoded by BFCL's decoder; for a multi-turn item, each decoded call run on BFCL's
simulated APIs (``execute_multi_turn_func_call``), the results given back as ``tool``
messages, until the model's text decodes to no call (or BFCL's step limit), then the next
user turn; held-back functions of a ``miss_func`` item are announced by BFCL's own message.
Scored by BFCL's checkers on the model's text (:func:`~agentkit.eval.bfcl.scoring.score_text`).

No agentkit scaffolding takes part: no planner, no tool schemas, no repair. Each run is one
row with the columns of the harness's table that apply, ``bfcl_mode`` ``prompt`` (agentkit's
runs say ``agentkit``), so both sit in one table. A backend with a ``temperature`` decodes
greedily (0) here, as BFCL asks.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import Sequence
from typing import Any

from agentkit.calls.tracer import CallTracer
from agentkit.errors import AgentkitError
from agentkit.eval.bfcl._package import bfcl_module
from agentkit.eval.bfcl.catalog import BfclItem
from agentkit.eval.bfcl.scoring import BfclScore, score_text
from agentkit.models.base import ChatMessage, ChatModel
from agentkit.models.spec import create_model

__all__ = ["MODE", "run_prompt_mode", "prompt_mode_row"]

#: the ``bfcl_mode`` of these rows
MODE = "prompt"
_ANSWER_CHARS = 500


def _model(model: str | ChatModel) -> tuple[ChatModel, bool]:
    """The backend, and whether it was made here (to close)."""
    if isinstance(model, ChatModel):
        return model, False
    made = create_model(model)
    if not isinstance(made, ChatModel):
        raise AgentkitError(f"prompt mode needs a chat model, not {model!r}")
    if isinstance(getattr(made, "temperature", None), float):
        made.temperature = 0.0  # type: ignore[attr-defined]  # greedy, as BFCL asks
    return made, True


def run_prompt_mode(
    items: Sequence[BfclItem], model: str | ChatModel, *, progress: bool = False
) -> list[dict[str, Any]]:
    """One row per item: *model* alone, in BFCL's prompt mode (see the module docstring)."""

    async def main() -> list[dict[str, Any]]:
        backend, made = _model(model)
        try:
            rows = []
            for number, item in enumerate(items, 1):
                rows.append(await prompt_mode_row(item, backend, label=_label(model)))
                if progress:
                    print(f"prompt mode: {number}/{len(items)}", flush=True)
            return rows
        finally:
            if made:
                await backend.aclose()

    return asyncio.run(main())


def _label(model: str | ChatModel) -> str:
    return model if isinstance(model, str) else model.spec or type(model).__name__


async def _ask(tracer: CallTracer, messages: list[dict[str, Any]]) -> str:
    sent = [ChatMessage(role=m["role"], content=str(m["content"])) for m in messages]
    async with tracer.call("chat", sent) as call:
        completion = await call.reply()
    return completion.text


async def prompt_mode_row(item: BfclItem, model: ChatModel, *, label: str = "") -> dict[str, Any]:
    """Run *item* on *model* in BFCL's prompt mode; its row."""
    tracer = CallTracer.standalone(model)  # its usage and records: the row's figures
    started = time.perf_counter()
    error = ""
    texts: list[list[str]] = []
    try:
        if item.kind == "multi_turn":
            texts = await _multi_turn(item, tracer)
        else:
            texts = [[await _ask(tracer, _first_messages(item, item.functions))]]
        score = score_text(item, texts)
    except AgentkitError as failure:
        error = f"{type(failure).__name__}: {failure}"
        score = BfclScore(False, "agentkit:model_error", error)
    wall_ms = (time.perf_counter() - started) * 1000
    answer = texts[-1][-1] if texts and texts[-1] else ""
    row: dict[str, Any] = {
        "scenario": item.id,
        "title": f"BFCL {item.category} {item.id}",
        "language": "en",
        "agent": "",
        "tags": f"bfcl,{item.category}",
        "point": 0,
        "repeat": 0,
        "bfcl_mode": MODE,
        "model": label or model.spec,
        "user_model": "",
        "passed": score.valid and not error,
        "outcome": "error" if error else "passed" if score.valid else "failed",
        "error": error,
        "failures": "" if score.valid else f"BFCL {score.error_type}: {score.error}"[:500],
        "turns": len(texts),
        "model_calls": tracer.usage.calls,
        "input_tokens": tracer.usage.input_tokens,
        "output_tokens": tracer.usage.output_tokens,
        "answer": answer[:_ANSWER_CHARS],
        "bfcl_category": item.category,
        "bfcl_id": item.id,
        "bfcl_valid": score.valid,
        "bfcl_error_type": score.error_type,
        "bfcl_error": score.error,
        "latency_ms": round(sum(record.latency_ms for record in tracer.records), 3),
        "wall_ms": round(wall_ms, 3),
    }
    return row


def _first_messages(item: BfclItem, functions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    utils = bfcl_module("model_handler.utils")
    first = [{"role": m.role, "content": m.content} for m in item.turns[0]]
    return list(
        utils.system_prompt_pre_processing_chat_model(
            first, copy.deepcopy(list(functions)), item.id
        )
    )


async def _multi_turn(item: BfclItem, tracer: CallTracer) -> list[list[str]]:
    prompts = bfcl_module("constants.default_prompts")
    executor = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    decode = bfcl_module("model_handler.utils").default_decode_execute_prompting
    name = f"agentkitprompt{uuid.uuid4().hex}"
    long_context = "long_context" in item.category or "composite" in item.category
    messages: list[dict[str, Any]] = []
    replies: list[list[str]] = []
    try:
        for index, turn in enumerate(item.turns):
            said = [{"role": m.role, "content": m.content} for m in turn]
            if index in item.held_back:
                said = [{
                    "role": "user",
                    "content": prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(
                        functions=list(item.held_back[index])
                    ),
                }]  # fmt: skip
            if index == 0:
                said = _first_messages(item, item.functions)
            messages.extend(said)
            steps: list[str] = []
            for _ in range(prompts.MAXIMUM_STEP_LIMIT + 1):
                text = await _ask(tracer, messages)
                steps.append(text)
                messages.append({"role": "assistant", "content": text})
                try:
                    calls = decode(text, has_tool_call_tag=False)
                except Exception:
                    break
                if executor.is_empty_execute_response(calls):
                    break
                results, _ = executor.execute_multi_turn_func_call(
                    calls,
                    copy.deepcopy(item.initial_config),
                    list(item.involved_classes),
                    name,
                    item.id,
                    long_context=long_context,
                    is_evaL_run=False,
                )
                messages.extend({"role": "tool", "content": result} for result in results)
            replies.append(steps)
    finally:
        kept = vars(executor)
        for key in [key for key in kept if key.startswith(name)]:
            del kept[key]
    return replies
