"""Embeddings in the embedded model's worker: a text's vector from the same GGUF.

Used by :mod:`agentkit.models._llama_worker` for its ``embed`` op (never imported by the
parent, which has no llama_cpp loaded). The chat context cannot give embeddings (llama.cpp
sets that per context), so the first ``embed`` request loads a second, small context on the
same weights with ``embedding=True`` (the file is memory-mapped: the weights are not read
twice). Each text becomes its tokens' mean-pooled last hidden state, unit length; texts are
cut to the context's size.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["EMBED_CONTEXT", "Embedder"]

#: tokens per text an embedding reads (a tool's description or a request is far shorter)
EMBED_CONTEXT = 512


class Embedder:
    """A lazily loaded embedding context for one GGUF file."""

    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.seed = seed
        self._llama: Any = None

    def _load(self) -> Any:  # noqa: ANN401 - llama_cpp.Llama
        if self._llama is None:
            from llama_cpp import Llama

            self._llama = Llama(
                model_path=self.path,
                embedding=True,
                n_ctx=EMBED_CONTEXT,
                n_batch=EMBED_CONTEXT,
                n_ubatch=EMBED_CONTEXT,
                seed=self.seed,
                verbose=False,
            )
        return self._llama

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text (an empty text is an error)."""
        if any(not text.strip() for text in texts):
            raise ValueError("cannot embed an empty text")
        llama = self._load()
        vectors: list[list[float]] = []
        for text in texts:
            value = llama.embed(text, truncate=True)
            if value and isinstance(value[0], list):  # per-token rows: pool them here
                width = len(value[0])
                value = [sum(row[i] for row in value) / len(value) for i in range(width)]
            norm = math.sqrt(sum(float(x) * float(x) for x in value)) or 1.0
            vectors.append([round(float(x) / norm, 6) for x in value])
        return vectors
