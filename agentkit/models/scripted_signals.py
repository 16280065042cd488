"""Scripted models that also have the embedded model's two router signals, for tests.

The router (:mod:`agentkit.planning.tool_choice`) uses a backend's likelihood scoring
(``score``: the log-probability of a text after a prompt) and its embeddings (``embed``) when
the backend has them (:attr:`~agentkit.models.base.ChatModel.scores` and ``embeds``).
A :class:`~agentkit.models.scripted.ScriptedModel` has neither, so it stands for a backend
without them; :func:`scripted_signals` makes one that has the signals given to it (from
callables), and records what it was asked, so a test can drive every path of the router
without the real model. Built on the scripted model: chat replies come from its script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentkit.models.scripted import Script, ScriptedModel

__all__ = ["Embed", "Score", "ScoringScriptedModel", "SignalScriptedModel", "scripted_signals"]

#: the log-probabilities (one per text token, or one total) of *text* after *prompt*
Score = Callable[[str, str], Sequence[float]]
#: one vector per text
Embed = Callable[[str], Sequence[float]]


class ScoringScriptedModel(ScriptedModel):
    """A scripted chat model that scores likelihoods with *score* (``score`` requests are
    recorded in :attr:`pairs`)."""

    scores = True

    def __init__(self, script: Script, *, score: Score, name: str = "inline") -> None:
        super().__init__(script, name=name)
        self._score = score
        self.pairs: list[tuple[str, str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
        self.pairs.extend(pairs)
        return [list(self._score(prompt, text)) for prompt, text in pairs]


class SignalScriptedModel(ScoringScriptedModel):
    """Scoring and embeddings (``embed`` requests are recorded in :attr:`embedded`)."""

    embeds = True

    def __init__(self, script: Script, *, score: Score, embed: Embed, name: str = "inline") -> None:
        super().__init__(script, score=score, name=name)
        self._embed = embed
        self.embedded: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [list(self._embed(text)) for text in texts]


def scripted_signals(
    script: Script, *, score: Score, embed: Embed | None = None, name: str = "inline"
) -> ScoringScriptedModel:
    """A scripted model with likelihood scoring (and embeddings, when *embed* is given)."""
    if embed is None:
        return ScoringScriptedModel(script, score=score, name=name)
    return SignalScriptedModel(script, score=score, embed=embed, name=name)
