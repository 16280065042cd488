"""τ²'s natural-language assertions, graded by an agentkit model (``--judge-model``).

τ²'s ``NLAssertionsEvaluator`` asks an LLM — through ``tau2.utils.llm_utils.generate``, which
calls litellm — whether the conversation meets each of the task's natural-language
assertions. agentkit's stand-in for that module (:mod:`agentkit.eval.tau2._package`) answers
``generate`` here: with the judge model the scorer was given (any model spec, through the
model-call tracer like every model call), else it refuses and the assertions are reported as
not scored. τ²'s own prompt and parsing are used as they are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from agentkit.eval.tau2._package import tau2_module
from agentkit.models.base import ChatMessage, ChatModel, Completion

__all__ = ["generate", "grading_with", "nl_assertions"]

_JUDGE: ContextVar[ChatModel | None] = ContextVar("tau2_judge", default=None)


@contextmanager
def grading_with(model: ChatModel) -> Iterator[None]:
    """τ²'s ``generate`` calls *model* in the block."""
    token = _JUDGE.set(model)
    try:
        yield
    finally:
        _JUDGE.reset(token)


async def _ask(model: ChatModel, messages: list[ChatMessage]) -> Completion:
    from agentkit.calls.tracer import CallTracer

    tracer = CallTracer.standalone(model)
    async with tracer.call("judge", messages) as call:
        completion = await call.reply()
        call.read(raw=completion.text)
        return completion


def generate(model: str, messages: Sequence[Any], **kwargs: Any) -> Any:  # noqa: ANN401
    """τ²'s ``generate(model, messages, …)``: the judge's reply as τ²'s ``AssistantMessage``."""
    judge = _JUDGE.get()
    if judge is None:
        raise RuntimeError("tau2's natural-language assertions need --judge-model: not scored")
    from agentkit.eval.point import run_sync

    chat: list[ChatMessage] = []
    for message in messages:
        role: Literal["system", "user", "assistant"] = (
            message.role if message.role in ("system", "user", "assistant") else "user"
        )
        chat.append(ChatMessage(role=role, content=str(message.content or "")))
    completion = run_sync(_ask(judge, chat))
    return tau2_module("data_model.message").AssistantMessage(
        role="assistant", content=completion.text
    )


def nl_assertions(task: Any, messages: Sequence[Any], judge: ChatModel) -> Any:  # noqa: ANN401
    """τ²'s ``NLAssertionsEvaluator`` on *messages*, graded by *judge* (τ²'s RewardInfo)."""
    evaluator = tau2_module("evaluator.evaluator_nl_assertions").NLAssertionsEvaluator
    with grading_with(judge):
        return evaluator.calculate_reward(task=task, full_trajectory=list(messages))
