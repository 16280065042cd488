"""How an OpenAI-compatible endpoint takes a JSON schema, and whether an error answer was a refusal.

Servers disagree on the request shape for structured output, so shapes are tried in order:

    json_schema   {"type": "json_schema", "json_schema": {name, schema, strict}}
                  OpenAI, vLLM, Ollama, llama.cpp's llama-server, LM Studio
    json_object   {"type": "json_object", "schema": ...}      llama-cpp-python's server
    plain         no response_format; the reply is validated like any other

:class:`ShapeMemory` remembers, per endpoint (base URL + model), the first shape a server
accepted; :data:`SHAPE_MEMORY` is the process-wide one, so a new model object for the same
endpoint starts from what worked. :func:`classify_failure` reads an error answer: a refusal of
the request (not worth retrying; the next shape may pass), a transient fault (retry), or a
failure that is about neither (raise).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "SHAPES",
    "SHAPE_MEMORY",
    "Endpoint",
    "Failure",
    "Shape",
    "ShapeMemory",
    "classify_failure",
    "response_format",
]

Shape = Literal["json_schema", "json_object", "plain"]
#: the order shapes are tried in: the most enforcing first
SHAPES: tuple[Shape, ...] = ("json_schema", "json_object", "plain")

Failure = Literal["refused", "transient", "failed"]

# Statuses that say nothing about the request's shape: credentials, a wrong URL or model name,
# a request timeout. Not retried, and trying another shape would not help.
_NOT_ABOUT_THE_SHAPE = frozenset({401, 403, 404, 408})
# Gateway and overload statuses are transient whatever their body says (it is often a proxy's).
_TRANSIENT = frozenset({429, 502, 503, 504})
# A 4xx that names a problem no other shape fixes (OpenAI and llama-cpp-python codes / texts).
_OTHER_PROBLEM = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? (the )?context window"
    r"|model_not_found",
    re.IGNORECASE,
)
# A 5xx body saying the *request* was invalid: OpenAI's error type, pydantic's validation texts
# (llama-cpp-python's server answers an unknown response_format type with HTTP 500
# "Input should be 'text' or 'json_object'"), and plain words for the same.
_INVALID_REQUEST = re.compile(
    r"invalid_request_error|validation error|input should be|field required"
    r"|extra inputs are not permitted|literal_error|unprocessable|invalid request|bad request"
    r"|unrecognized request argument|unknown parameter|response_format",
    re.IGNORECASE,
)


def classify_failure(status: int, body: str) -> Failure:
    """What an HTTP error answer means for the request that got it.

    ``refused``: the server rejected this request (a 4xx, a 501, or a 5xx whose *body* says the
    request was invalid); resending it cannot help, another shape might. ``transient``: 429,
    502/503/504 and any other 5xx: worth a retry. ``failed``: neither (401/403/404/408, or a 4xx
    naming a problem such as the context length that no request shape fixes).
    """
    if status in _TRANSIENT:
        return "transient"
    if 400 <= status < 500:
        if status in _NOT_ABOUT_THE_SHAPE or _OTHER_PROBLEM.search(body):
            return "failed"
        return "refused"
    if status == 501 or (status >= 500 and _INVALID_REQUEST.search(body)):
        return "refused"
    return "transient" if status >= 500 else "failed"


def response_format(shape: Shape, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` value for *shape*, or None for a plain request."""
    if shape == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    if shape == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


@dataclass(frozen=True)
class Endpoint:
    """One model behind one base URL: what the memory is keyed by."""

    base_url: str
    model: str

    @classmethod
    def of(cls, base_url: str, model: str) -> Endpoint:
        return cls(base_url.rstrip("/"), model)


class ShapeMemory:
    """The shape each endpoint last accepted. Thread-safe; :meth:`clear` resets it (tests)."""

    def __init__(self) -> None:
        self._shapes: dict[Endpoint, Shape] = {}
        self._lock = threading.Lock()

    def recall(self, endpoint: Endpoint) -> Shape | None:
        with self._lock:
            return self._shapes.get(endpoint)

    def candidates(self, endpoint: Endpoint) -> tuple[Shape, ...]:
        """The shapes to try, in order: from the remembered one on (all of them if none)."""
        known = self.recall(endpoint)
        return SHAPES[SHAPES.index(known) :] if known else SHAPES

    def remember(self, endpoint: Endpoint, shape: Shape) -> None:
        with self._lock:
            self._shapes[endpoint] = shape

    def clear(self) -> None:
        with self._lock:
            self._shapes.clear()


#: the process-wide memory every :class:`~agentkit.models.openai.OpenAIModel` shares by default
SHAPE_MEMORY = ShapeMemory()
