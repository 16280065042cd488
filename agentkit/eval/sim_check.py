"""A check on the simulated user: did the simulator play its part, or is the run's verdict
about a user that never was?

A simulated user (:class:`~agentkit.eval.scenario.SimulatedUser`) can say what it was never
told, abandon its goal, or leave while the agent waits for its answer — and the run is then
scored as the agent's failure. :func:`check_sim_user` reads the simulated user's messages in a
run's transcript against its persona, goal and what it knows, and lists each deviation
(:class:`SimDeviation`); the results table's ``sim_user_ok`` is False when there is one and
``sim_user_issues`` says which. Rules suffice here (no model is asked):

* ``leak`` — a message says one of the user's ``unknown_info`` (what the scenario says the
  user does not know; compared case-folded, spaces collapsed), or a value with digits (an id,
  an amount, a date, an e-mail) that is in none of the persona, the goal, what it knows, or
  what the agent said before that message;
* ``contradiction`` — a message takes back the goal: it says one of the scenario's
  ``goal_contradictions`` (the phrases that would abandon this goal, given with the scenario:
  a rule cannot know them in every language);
* ``early_end`` — the simulator ended the conversation (``done`` or ``give_up``) while the
  agent's last turn was waiting for the user's answer (a question, or a confirmation).

A consent answer is written in code, never by the model
(:data:`~agentkit.eval.simulator.CONSENT_REPLIES`), so it is never a deviation. The check
reads only the transcript and the scenario: re-scoring a stored table makes it again.
``agentkit compare`` and the gate leave flagged runs out with ``--exclude-sim-deviations``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentkit.eval.reading import read_run
from agentkit.eval.scenario import SimulatedUser
from agentkit.eval.transcript import Transcript

__all__ = ["SimDeviation", "check_sim_user", "sim_user_columns"]

#: a value a user could only know if told: a run of characters holding a digit (ids, amounts,
#: dates, phone numbers), or an e-mail address
_VALUE = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|[\w./:-]*\d[\w./:-]*")


@dataclass(frozen=True, slots=True)
class SimDeviation:
    """One place the simulated user left its part: which rule, its message (1-based), why."""

    kind: Literal["leak", "contradiction", "early_end"]
    message: int
    detail: str

    def __str__(self) -> str:
        where = f"message {self.message}" if self.message else "end"
        return f"{self.kind} ({where}): {self.detail}"


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def _given(user: SimulatedUser) -> str:
    """Everything the simulator was told, as one folded text."""
    knows = json.dumps(user.knows, ensure_ascii=False)
    return _folded(" ".join([user.persona, user.goal, user.opening or "", knows]))


def check_sim_user(
    user: SimulatedUser, transcript: Transcript, stopped_by: str = ""
) -> list[SimDeviation]:
    """The deviations of the simulated user *user* in *transcript* (see the module
    docstring); *stopped_by*: why the conversation ended (the row's ``sim_stopped_by``)."""
    from agentkit.eval.simulator import CONSENT_REPLIES

    consent_words = {
        _folded(word) for replies in CONSENT_REPLIES.values() for word in replies.values()
    }
    given = _given(user)
    heard = ""  # what the agent said so far
    deviations: list[SimDeviation] = []
    waiting = False
    for number, turn in enumerate(read_run(transcript).turns, start=1):
        said = _folded(turn.turn.said)
        if said and said not in consent_words:
            deviations += _leaks(user, said, given, heard, number)
            deviations += [
                SimDeviation("contradiction", number, f"said {phrase!r}, which abandons the goal")
                for phrase in user.goal_contradictions
                if _folded(phrase) in said
            ]
        asked = [*turn.questions, *turn.consents]
        heard += "".join(" " + _folded(event.question) for event in asked)
        heard += " " + _folded(turn.answer)
        waiting = bool(asked)
    if waiting and stopped_by in ("user_done", "user_gave_up"):
        how = "said it was done" if stopped_by == "user_done" else "gave up"
        deviations.append(
            SimDeviation("early_end", 0, f"{how} while the agent waited for its answer")
        )
    return deviations


def _leaks(
    user: SimulatedUser, said: str, given: str, heard: str, number: int
) -> list[SimDeviation]:
    found = [
        SimDeviation("leak", number, f"said {item!r}, which it does not know")
        for item in user.unknown_info
        if _folded(item) in said
    ]
    for value in dict.fromkeys(match.strip(".,:;/-") for match in _VALUE.findall(said)):
        if len(value) < 2 or value in given or value in heard:
            continue
        found.append(SimDeviation("leak", number, f"said {value!r}, which it was not given"))
    return found


def sim_user_columns(
    user: SimulatedUser | None, transcript: Transcript, stopped_by: str = ""
) -> tuple[bool | None, str]:
    """The row's ``sim_user_ok`` and ``sim_user_issues`` (None, "" without a simulated user)."""
    if user is None or not transcript.turns:
        return None, ""
    deviations: Sequence[SimDeviation] = check_sim_user(user, transcript, stopped_by)
    return not deviations, "; ".join(str(item) for item in deviations)
