"""The embedded model's worker process: loads one GGUF with llama-cpp-python and serves it.

Run as ``python -m agentkit.models._llama_worker --model PATH --n-ctx N --seed S`` by
:mod:`agentkit.models.llama_process`, never imported by the parent. Native code (ggml's
kernels) runs only here, so an illegal instruction, a segfault or an out-of-memory kill ends
this process and becomes a :class:`~agentkit.errors.ModelError` in the parent instead of
taking a Jupyter kernel, the HTTP server or the test run down with it.

Protocol: one JSON object per line. The parent writes requests on stdin::

    {"op": "generate", "id": 1, "messages": [...], "schema": {...} | null,
     "max_tokens": 256, "temperature": 0.2, "repeat_penalty": 1.3, "seed": 7}
    {"op": "count", "id": 2, "texts": ["...", ...]}
    {"op": "score", "id": 3, "pairs": [["prompt", "continuation"], ...]}
    {"op": "embed", "id": 4, "texts": ["...", ...]}
    {"op": "cancel", "id": 1}

and reads replies on the file descriptor that was stdout when the process started (native
code's own prints are sent to stderr, so they cannot corrupt the stream)::

    {"ready": true, "system_info": "..."}         once, after the weights are loaded
    {"fatal": "..."}                              instead, when they cannot be (then exit 3)
    {"id": 1, "delta": "text"}                    zero or more per generate
    {"id": 1, "done": {"text", "input_tokens", "output_tokens", "stop_reason"}}
    {"id": 2, "counts": [3, 5]}
    {"id": 3, "scores": [[-1.2, -0.4], ...], "prompt_tokens": [9, 12], "evaluated_tokens": 30}
    {"id": 4, "vectors": [[0.01, -0.2, ...], ...]}  unit length, one per text
    {"id": N, "error": "...", "kind": "grammar" | "request"}

``score`` generates nothing: for each pair it gives the log-probability of each token of the
continuation after the prompt (raw text), read off one batched decode
(:mod:`agentkit.models._llama_scoring`); a prompt start the context already holds is reused.

``embed`` reads each text with a second context on the same weights, loaded on the first
``embed`` request (:mod:`agentkit.models._llama_embed`).

Requests run one at a time, in order. A cancel stops a generation between tokens (the parent
kills the process if it does not stop soon). End of stdin — the parent closed the pipe or
died — cancels the generation under way (a killed parent leaves no worker computing for no
one) and ends the process.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
from typing import IO, Any

GGUF_MAGIC = b"GGUF"


def _send(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message, ensure_ascii=False) + "\n")
    out.flush()


class _Requests:
    """stdin, read on a thread: requests queue up in order; a cancel flags its request now."""

    def __init__(self) -> None:
        self.pending: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._cancelled: set[int] = set()
        self._gone = False  # end of stdin: every request is cancelled
        self._lock = threading.Lock()
        threading.Thread(target=self._read, name="requests", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            try:
                request = json.loads(line)
            except json.JSONDecodeError:
                continue  # only the parent writes here; a torn line is not a request
            if not isinstance(request, dict):
                continue
            if request.get("op") == "cancel":
                with self._lock:
                    self._cancelled.add(int(request.get("id", -1)))
            else:
                self.pending.put(request)
        with self._lock:
            self._gone = True  # a generation under way stops at its next token
        self.pending.put(None)  # the parent is gone

    def cancelled(self, request_id: int) -> bool:
        with self._lock:
            return self._gone or request_id in self._cancelled


def _load(path: str, n_ctx: int, seed: int) -> Any:  # noqa: ANN401 - llama_cpp.Llama
    with open(path, "rb") as file:
        magic = file.read(4)
    if magic != GGUF_MAGIC:
        raise ValueError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    from llama_cpp import Llama

    return Llama(model_path=path, n_ctx=n_ctx, seed=seed, verbose=False)


def _generate(
    llama: Any,  # noqa: ANN401 - llama_cpp.Llama
    request: dict[str, Any],
    requests: _Requests,
    out: IO[str],
) -> None:
    request_id = int(request["id"])
    grammar = None
    if request.get("schema") is not None:
        from llama_cpp.llama_grammar import LlamaGrammar

        try:
            grammar = LlamaGrammar.from_json_schema(json.dumps(request["schema"]), verbose=False)
        except Exception as error:  # the converter raises plain exceptions of several kinds
            message = f"cannot turn the JSON schema into a grammar: {error}"
            _send(out, {"id": request_id, "error": message, "kind": "grammar"})
            return
    messages: list[dict[str, str]] = request["messages"]
    prompt_tokens = sum(
        len(llama.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in messages
    )
    pieces: list[str] = []
    finish = "stop"
    stream = llama.create_chat_completion(
        messages=messages,
        stream=True,
        grammar=grammar,
        max_tokens=int(request["max_tokens"]),
        temperature=float(request["temperature"]),
        repeat_penalty=float(request["repeat_penalty"]),
        seed=int(request["seed"]),
    )
    for chunk in stream:
        if requests.cancelled(request_id):
            finish = "cancelled"
            break
        choice = dict(chunk["choices"][0])
        piece = dict(choice.get("delta") or {}).get("content")
        if isinstance(piece, str) and piece:
            pieces.append(piece)
            _send(out, {"id": request_id, "delta": piece})
        if choice.get("finish_reason"):
            finish = str(choice["finish_reason"])
    text = "".join(pieces)
    output_tokens = len(llama.tokenize(text.encode("utf-8"), add_bos=False))
    done = {
        "text": text,
        "input_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "stop_reason": finish,
    }
    _send(out, {"id": request_id, "done": done})


def _count(llama: Any, request: dict[str, Any], out: IO[str]) -> None:  # noqa: ANN401
    texts: list[str] = request["texts"]
    counts = [len(llama.tokenize(text.encode("utf-8"), add_bos=False)) for text in texts]
    _send(out, {"id": int(request["id"]), "counts": counts})


def _score(llama: Any, request: dict[str, Any], out: IO[str]) -> None:  # noqa: ANN401
    from agentkit.models._llama_scoring import score_pairs

    pairs = [(str(prompt), str(continuation)) for prompt, continuation in request["pairs"]]
    scored = score_pairs(llama, pairs)
    reply = {
        "id": int(request["id"]),
        "scores": scored.logprobs,
        "prompt_tokens": scored.prompt_tokens,
        "evaluated_tokens": scored.evaluated_tokens,
    }
    _send(out, reply)


def _embed(embedder: Any, request: dict[str, Any], out: IO[str]) -> None:  # noqa: ANN401
    texts = [str(text) for text in request["texts"]]
    _send(out, {"id": int(request["id"]), "vectors": embedder.embed(texts)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentkit.models._llama_worker")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    # The protocol keeps the original stdout; anything native code prints goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the parent's terminal is its own

    try:
        llama = _load(args.model, args.n_ctx, args.seed)
    except Exception as error:  # llama_cpp raises ValueError and others on a bad file
        _send(out, {"fatal": f"cannot load {args.model}: {error}"})
        return 3
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    system_info = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    _send(out, {"ready": True, "system_info": system_info.strip()})

    from agentkit.models._llama_embed import Embedder

    embedder = Embedder(args.model, args.seed)
    requests = _Requests()
    while (request := requests.pending.get()) is not None:
        try:
            if request.get("op") == "generate":
                _generate(llama, request, requests, out)
            elif request.get("op") == "count":
                _count(llama, request, out)
            elif request.get("op") == "score":
                _score(llama, request, out)
            elif request.get("op") == "embed":
                _embed(embedder, request, out)
            else:
                message = f"unknown op {request.get('op')!r}"
                _send(out, {"id": request.get("id"), "error": message, "kind": "request"})
        except Exception as error:  # a bad request must not end the worker
            message = f"{type(error).__name__}: {error}"
            _send(out, {"id": request.get("id"), "error": message, "kind": "request"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
