"""A semantic signal for tool choice: request and tools compared by meaning, not words.

The lexical ranking (:mod:`agentkit.planning.tool_ranking`) needs a shared word; a memo for
a note, a bot for an agent or "throw away" for delete share none. Here the model itself reads
each tool's self-description — ``name: description`` and every example request, one text
each — and the request, and turns each into a vector (the embedded model: mean-pooled hidden
states of the same GGUF, :meth:`~agentkit.models.llama.LlamaModel.embed`). A tool's semantic
score is the best cosine between the request and any of its texts, after the vectors are
centred on the toolset's mean (a small causal model's raw vectors all point one way: raw
cosines sit between 0.8 and 1.0 for any pair; centring leaves what tells the tools apart).

The tools' vectors are computed once per toolset and model and cached (a tool added to the
registry is embedded at its first ranking); a request costs one embedding. A backend without
embeddings gives no semantic signal, and the router ranks by words alone.

With ``planner.router_embedder: "wordllama"`` the vectors come instead from a sentence
embedder whose weights ship inside its wheel (:class:`WordLlamaEmbedder`: WordLlama's
``l2_supercat`` static token embeddings, 256 dimensions, MIT; the ``router`` extra): made for
sentence similarity, cheap (no model call), the same for every chat model. Nothing is
downloaded: the embedder is built from the files in the installed package, or refuses. Without
the extra, :func:`wordllama_embedder` raises :class:`~agentkit.errors.MissingExtraError`; the
router then goes on with the model's own embeddings (the ``model`` embedder) and says so in the
turn's ``route`` record and, once per process, in the ``agentkit.planning`` log.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit._extras import missing, require
from agentkit.tools import Tool, ToolRegistry

__all__ = [
    "SemanticIndex",
    "SemanticSignal",
    "WordLlamaEmbedder",
    "semantic_index",
    "semantic_scores",
    "semantic_signal",
    "tool_texts",
    "wordllama_embedder",
]

#: what needs the ``router`` extra, in its MissingExtraError
WORDLLAMA_FEATURE = "the router's sentence embedder (planner.router_embedder 'wordllama')"

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


def tool_texts(tool: Tool[Any]) -> list[str]:
    """What a tool says about itself, one text per meaning: ``name: description`` (the name's
    words spaced out), then each example request."""
    head = f"{tool.name.replace('_', ' ')}: {' '.join(tool.description.split())}"
    return [head, *(" ".join(example.split()) for example in tool.examples if example.strip())]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _centred(vector: Sequence[float], mean: Sequence[float]) -> list[float]:
    return _unit([x - m for x, m in zip(vector, mean, strict=True)])


@dataclass(frozen=True)
class SemanticIndex:
    """The centred vectors of a toolset's texts, each with the tool it belongs to."""

    names: tuple[str, ...]
    owners: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...]
    mean: tuple[float, ...]
    #: the texts' vectors before centring, unit length (for :meth:`similarities`)
    units: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def build(
        cls, names: Sequence[str], owners: Sequence[str], raw: Sequence[Sequence[float]]
    ) -> SemanticIndex:
        width = len(raw[0]) if raw else 0
        mean = [sum(v[i] for v in raw) / len(raw) for i in range(width)] if raw else []
        vectors = tuple(tuple(_centred(v, mean)) for v in raw)
        units = tuple(tuple(_unit(v)) for v in raw)
        return cls(tuple(names), tuple(owners), vectors, tuple(mean), units)

    def scores(self, request: Sequence[float]) -> dict[str, float]:
        """Per tool, the best cosine between the (centred) request and one of its texts."""
        if not self.mean:
            return {name: 0.0 for name in self.names}
        query = _centred(request, self.mean)
        best = {name: -1.0 for name in self.names}
        for owner, vector in zip(self.owners, self.vectors, strict=True):
            cosine = sum(q * v for q, v in zip(query, vector, strict=True))
            best[owner] = max(best[owner], cosine)
        return {name: round(value, 4) for name, value in best.items()}

    def similarities(self, request: Sequence[float]) -> dict[str, float]:
        """Per tool, the best *raw* cosine between the request and one of its texts: how
        close in meaning the request is to the tool at all (centring keeps only what tells
        the tools apart, so a toolset of one tool always scores 0). Meaningful for a
        sentence embedder (WordLlama); a small causal model's raw cosines all sit near 1."""
        query = _unit(request)
        best = {name: -1.0 for name in self.names}
        for owner, vector in zip(self.owners, self.units, strict=True):
            cosine = sum(q * v for q, v in zip(query, vector, strict=True))
            best[owner] = max(best[owner], cosine)
        return {name: round(value, 4) for name, value in best.items()}


@dataclass(frozen=True)
class SemanticSignal:
    """A request compared with a toolset: per tool, the centred score (which tool, among
    these) and the raw similarity (how close to this tool at all)."""

    scores: dict[str, float]
    similarities: dict[str, float]


#: text -> vector, per embedding backend (a tool's texts are embedded once per process)
_VECTORS: weakref.WeakKeyDictionary[Any, dict[str, tuple[float, ...]]] = weakref.WeakKeyDictionary()
_Indexed = dict[int, tuple[tuple[str, ...], SemanticIndex]]
_INDEXES: weakref.WeakKeyDictionary[ToolRegistry, _Indexed] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


async def _vectors(model: object, texts: Sequence[str], embed: Embed) -> list[tuple[float, ...]]:
    with _LOCK:
        known = _VECTORS.setdefault(model, {})
        missing = [text for text in dict.fromkeys(texts) if text not in known]
    if missing:
        fresh = await embed(missing)
        if len(fresh) != len(missing):
            raise ValueError(f"{len(fresh)} vectors for {len(missing)} texts")
        with _LOCK:
            known.update((text, tuple(vector)) for text, vector in zip(missing, fresh, strict=True))
    return [known[text] for text in texts]


async def semantic_index(model: object, tools: ToolRegistry, embed: Embed) -> SemanticIndex:
    """The toolset's index for *model*: built once, again when a tool was registered
    (*embed*: how to call the model, a traced call's ``embed``)."""
    names = tools.names()
    with _LOCK:
        cached = _INDEXES.setdefault(tools, {}).get(id(model))
    if cached is not None and cached[0] == names:
        return cached[1]
    owners: list[str] = []
    texts: list[str] = []
    for name in names:
        for text in tool_texts(tools.get(name)):
            owners.append(name)
            texts.append(text)
    index = SemanticIndex.build(names, owners, await _vectors(model, texts, embed))
    with _LOCK:
        _INDEXES.setdefault(tools, {})[id(model)] = (names, index)
    return index


async def semantic_scores(
    model: object, tools: ToolRegistry, request: str, embed: Embed
) -> dict[str, float]:
    """Per tool, how close *request* is in meaning to what the tool says about itself
    (*embed*: how to call the model, a traced call's ``embed``: the module calls no model)."""
    return (await semantic_signal(model, tools, request, embed)).scores


async def semantic_signal(
    model: object, tools: ToolRegistry, request: str, embed: Embed
) -> SemanticSignal:
    """:func:`semantic_scores` and the raw similarities, from one embedding of *request*."""
    index = await semantic_index(model, tools, embed)
    (vector,) = await embed([" ".join(request.split())])  # not cached
    return SemanticSignal(index.scores(vector), index.similarities(vector))


class WordLlamaEmbedder:
    """Sentence vectors from WordLlama's static embeddings, loaded from the files its
    wheel ships (its own loader looks for the tokenizer in a folder the wheel does not have,
    then downloads it: not here)."""

    spec = "wordllama:l2_supercat_256"

    def __init__(self) -> None:
        try:
            import wordllama
            from safetensors import safe_open
            from wordllama import WordLlama
            from wordllama.inference import WordLlamaInference
        except ImportError as error:  # pragma: no cover - wordllama_embedder checks first
            raise missing("router", WORDLLAMA_FEATURE, error) from error
        from pathlib import Path

        root = Path(wordllama.__file__).parent
        tokenizer = WordLlama.load_tokenizer(
            root / "tokenizers" / "l2_supercat_tokenizer_config.json"
        )
        with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), "np") as weights:
            table = weights.get_tensor("embedding.weight")
        self._model = WordLlamaInference(table, tokenizer, binary=False)

    def vectors(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors (synchronous: a table lookup and a mean)."""
        if not texts:
            return []
        matrix = self._model.embed(list(texts), norm=True)
        return [[float(x) for x in row] for row in matrix]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.vectors(texts)


_WORDLLAMA: list[WordLlamaEmbedder] = []


def wordllama_embedder() -> WordLlamaEmbedder:
    """The process's WordLlama embedder, loaded at its first use (~3 s, 16 MB).

    Raises :class:`~agentkit.errors.MissingExtraError` (naming ``pip install
    'agentkit[router]'``) when the ``router`` extra is not installed."""
    require("router", WORDLLAMA_FEATURE, "wordllama", "safetensors", "tokenizers")
    with _LOCK:
        if not _WORDLLAMA:
            _WORDLLAMA.append(WordLlamaEmbedder())
        return _WORDLLAMA[0]
