"""The stdio guard's verdict on one inbound line, before the ``acp`` library sees it.

Why it exists: the library's reader (``agent-client-protocol`` 0.12.1) takes every line that
parses as JSON for a JSON-RPC object. Measured against an agent built on ``acp.run_agent``:

* a line that is valid JSON but not an object (``[1, 2]``, ``"hi"``, ``3``) raises inside the
  receive loop, and the agent process exits with status 1;
* so does a response whose ``id`` is unhashable (``{"id": [1], "result": 1}``) or whose
  ``error`` is not an object;
* a line that is not JSON is logged and dropped: the client is never answered and waits.

One hostile or buggy line must not end an editor's session, so :func:`judge` looks at every
line first and applies JSON-RPC 2.0 itself:

=====================================================  ==========================================
line                                                    verdict
=====================================================  ==========================================
not UTF-8, not JSON, NaN/Infinity, nested too deep      ``-32700`` Parse error, id null
a batch (array), a string, a number, null               ``-32600`` Invalid Request, id null
``jsonrpc`` not ``"2.0"``; id not a string/integer;     ``-32600`` (with the id when it is usable)
method not a string; params not an object or array
a malformed response from the client                    dropped (a response is never answered)
anything else                                           forwarded to the library unchanged
=====================================================  ==========================================

The library then routes what is forwarded: an unknown method is ``-32601``, params that do not
validate are ``-32602``. Lines over the size cap never reach :func:`judge`: the reader drops
them and answers :func:`oversized` (see :mod:`agentkit.acp_server.stdio`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "PARSE_ERROR",
    "Drop",
    "Forward",
    "Reply",
    "Verdict",
    "error_response",
    "judge",
    "oversized",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
#: deeper JSON than this is refused before any validator recurses into it (ACP messages
#: nest a handful of levels)
MAX_DEPTH: Final = 64
#: ids and method names longer than this are refused rather than echoed back
MAX_NAME: Final = 256

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Forward:
    """A well-formed JSON-RPC message: hand it to the library."""

    message: JsonObject


@dataclass(frozen=True)
class Reply:
    """A line that gets an error response and goes no further."""

    response: JsonObject
    reason: str


@dataclass(frozen=True)
class Drop:
    """A line that is neither answered nor forwarded (a malformed response, a blank line)."""

    reason: str


Verdict = Forward | Reply | Drop


def error_response(code: int, message: str, request_id: Any = None) -> JsonObject:  # noqa: ANN401 - a JSON-RPC id
    """A JSON-RPC error response (``request_id`` None means the request's id is unknown)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def oversized(limit: int) -> Reply:
    return Reply(
        error_response(INVALID_REQUEST, f"Invalid Request: a message is at most {limit} bytes"),
        "line over the size cap",
    )


class _NotFiniteError(ValueError):
    pass


def _reject_constant(name: str) -> Any:  # noqa: ANN401 - json's parse_constant hook
    raise _NotFiniteError(name)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e999 overflows to infinity
        raise _NotFiniteError(text)
    return number


def _depth_exceeds(value: object, limit: int) -> bool:
    """True when *value* nests arrays/objects deeper than *limit* (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: list[object] = list(node.values())
        elif isinstance(node, list):
            children = list(node)
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _valid_id(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and len(value) <= MAX_NAME


def _invalid(reason: str, request_id: Any = None) -> Reply:  # noqa: ANN401 - a JSON-RPC id
    return Reply(error_response(INVALID_REQUEST, f"Invalid Request: {reason}", request_id), reason)


def _parse(text: bytes) -> object:
    """The JSON value of *text*, or the :class:`Reply` a line that is not JSON gets."""
    try:
        return json.loads(
            text.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite
        )
    except UnicodeDecodeError:
        return Reply(error_response(PARSE_ERROR, "Parse error: not UTF-8"), "not UTF-8")
    except _NotFiniteError as error:
        return Reply(
            error_response(PARSE_ERROR, f"Parse error: {error} is not a finite number"), "NaN"
        )
    except RecursionError:
        return Reply(error_response(PARSE_ERROR, "Parse error: nested too deeply"), "too deep")
    except ValueError as error:
        return Reply(error_response(PARSE_ERROR, f"Parse error: {error}"), "not JSON")


def judge(line: bytes) -> Verdict:
    """What to do with one line read from stdin (without its newline)."""
    text = line.strip()
    if not text:
        return Drop("blank line")
    value = _parse(text)
    if isinstance(value, Reply):
        return value
    if isinstance(value, list):
        return _invalid("batches are not supported; send one JSON object per line")
    if not isinstance(value, dict):
        return _invalid(f"a message is a JSON object, not {type(value).__name__}")
    if _depth_exceeds(value, MAX_DEPTH):
        reply = error_response(PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH} levels")
        return Reply(reply, "too deep")
    return _request(value) if "method" in value else _response(value)


def _request(message: JsonObject) -> Verdict:
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not (request_id is None or _valid_id(request_id)):
        return _invalid("id must be a string or an integer")
    echo = request_id if has_id else None
    if message.get("jsonrpc") != "2.0":
        return _invalid('"jsonrpc" must be "2.0"', echo)
    method = message["method"]
    if not isinstance(method, str) or not method or len(method) > MAX_NAME:
        return _invalid("method must be a non-empty string", echo)
    params = message.get("params", {})
    if not isinstance(params, dict | list):
        reply = error_response(INVALID_PARAMS, "Invalid params: params must be an object", echo)
        return Reply(reply, "params not structured")
    return Forward(message)


def _response(message: JsonObject) -> Verdict:
    """A response to one of our requests (permission): checked, never answered."""
    if "id" not in message:
        return _invalid("neither a request (no method) nor a response (no id)")
    if not (message["id"] is None or _valid_id(message["id"])):
        return Drop("response with an invalid id")
    if message.get("jsonrpc") != "2.0":
        return Drop('response without "jsonrpc": "2.0"')
    if ("result" in message) == ("error" in message):
        return Drop("response needs exactly one of result and error")
    if "error" in message:
        error = message["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if (
            not isinstance(error, dict)
            or not isinstance(code, int)
            or isinstance(code, bool)
            or not isinstance(error.get("message"), str)
        ):
            return Drop("response with a malformed error")
    return Forward(message)
