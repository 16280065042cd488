"""Running agent work for a widget: on the agent's own background loop, without blocking.

Invariant: every turn and every cancel a widget starts for an :class:`~agentkit.Agent` runs on
the same event loop as ``Agent.send`` (:attr:`Agent.loop`, submitted with
:meth:`~agentkit.loop.BackgroundLoop.submit`). Live sessions are bound to the loop they were
opened on, so this is what lets a second message from a widget reach the live session
(scenario B) and lets the stop button's ``agent.cancel`` find the running turn in the same
session pool. No thread is started here: the loop thread runs the turn, and the caller gets its
:class:`concurrent.futures.Future` at once, so a widget callback returns immediately and the
kernel stays responsive while the reply streams in.

Events are handed to ``on_event`` as they arrive (on the loop thread), every one of them: a
turn's stream may go on after ``result`` (the ``compression`` event of the memory upkeep that
ran after it), so the future completes only when the stream ends. A failing callback never
stops the turn half-way: the turn is consumed to its end and the first callback error is
raised from the future afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

from agentkit import Agent, AgentkitError, Decision
from agentkit.events import AgentEvent

__all__ = ["busy", "start_cancel", "start_decision", "start_turn", "then", "widget_decision"]

T = TypeVar("T")


def start_turn(
    agent: Agent,
    conversation_id: str | None,
    text: str,
    on_event: Callable[[AgentEvent], None],
) -> Future[list[AgentEvent]]:
    """Start one turn (``agent.send_message``); its future holds every event of the turn.

    Errors raised before the turn starts (empty text, unknown or busy conversation, a bad model
    spec) come out of the future; nothing was written in those cases.
    """
    return agent.loop.submit(_consume(agent.send_message(conversation_id, text), on_event))


def start_decision(
    agent: Agent,
    conversation_id: str,
    decision: Decision,
    on_event: Callable[[AgentEvent], None],
) -> Future[list[AgentEvent]]:
    """Decide on a pending approval by its id (``agent.run_turn`` with the typed *decision*,
    as ``agent.adecide`` does) and continue the turn; like :func:`start_turn`, errors before
    the turn come out of the future (already decided, unknown, invalid arguments: nothing was
    run)."""
    return agent.loop.submit(_consume(agent.run_turn(conversation_id, decision), on_event))


def widget_decision(
    approval_id: str,
    decision: Literal["approve", "reject"],
    args: dict[str, Any] | None = None,
) -> Decision:
    """A widget's decision on the approval *approval_id* (source ``widget``)."""
    return Decision(approval_id, decision, "widget", args)


def start_cancel(agent: Agent, conversation_id: str) -> Future[bool]:
    """Ask the conversation's running turn to stop (``agent.cancel``); the future says
    whether the agent found one it can interrupt."""
    return agent.loop.submit(agent.cancel(conversation_id))


def busy(agent: Agent, conversation_id: str | None, started: Future[Any] | None) -> bool:
    """Whether a view should show *conversation_id* as busy: a turn of it runs, as the agent
    says (sent from this view or another, or its memory upkeep), or *started*, the turn the
    view sent, has not ended (before its ``session`` event it may have no conversation yet)."""
    if started is not None and not started.done():
        return True
    if conversation_id is None:
        return False
    try:
        return agent.turn_running(conversation_id)
    except AgentkitError:  # not an id the agent can have
        return False


def then(future: Future[T], after: Callable[[Future[T]], None]) -> Future[T]:
    """A future that completes like *future*, but only once ``after(future)`` has run.

    Views return this from their send methods, so whoever waits on it (a notebook cell, a
    test) sees the widgets already showing the finished turn. An error in *after* is raised
    from the returned future.
    """
    chained: Future[T] = Future()

    def settle(done: Future[T]) -> None:
        try:
            after(done)
        except Exception as error:
            chained.set_exception(error)
            return
        if done.cancelled():
            chained.cancel()
            chained.set_running_or_notify_cancel()
        elif (problem := done.exception()) is not None:
            chained.set_exception(problem)
        else:
            chained.set_result(done.result())

    future.add_done_callback(settle)
    return chained


async def _consume(
    events: AsyncIterator[AgentEvent], on_event: Callable[[AgentEvent], None]
) -> list[AgentEvent]:
    """Every event of a turn, each handed to *on_event*; a failing callback never cuts the
    turn short (its first error is raised once the turn is over)."""
    seen: list[AgentEvent] = []
    callback_error: Exception | None = None
    async for event in events:
        seen.append(event)
        try:
            on_event(event)
        except Exception as error:  # a view problem must not cut the turn short
            callback_error = callback_error or error
    if callback_error is not None:
        raise callback_error
    return seen
