"""Whether real model backends may be used: the switch behind :mod:`agentkit.testing`.

A test suite must not reach a real model by accident (an ``AGENTKIT_MODEL`` or
``OPENAI_BASE_URL`` left in a shell). Every real backend — the embedded ``llama``, ``openai:``,
``acp:`` and ``claude-cli`` — calls :func:`check_model_requests` before each request and
before it starts a process, so nothing is sent; such a backend says ``real_requests = True``,
and ``Agent.send_message`` checks that before a turn writes anything. Creating one is allowed
(a fork or a listing builds the agent's model without calling it). The doubles (scripted,
function, scripted sessions, replay) never check.

The switch is process-wide (a model call may run on a worker thread, where a context variable
would not follow): an override set by :func:`set_override` (the context managers of
``agentkit.testing``), else ``$AGENTKIT_ALLOW_MODEL_REQUESTS`` (``0``/``false``/``no``/``off``
turn requests off; subprocesses inherit it), else on.
"""

from __future__ import annotations

import os
import threading

from agentkit.errors import ModelRequestsBlockedError

__all__ = [
    "ALLOW_ENV",
    "check_model_requests",
    "model_requests_allowed",
    "set_override",
]

#: the environment variable that turns real model requests off (``0``) or on (``1``)
ALLOW_ENV = "AGENTKIT_ALLOW_MODEL_REQUESTS"
_OFF = frozenset({"0", "false", "no", "off"})

_lock = threading.Lock()
_override: bool | None = None


def model_requests_allowed() -> bool:
    """True unless an override or ``$AGENTKIT_ALLOW_MODEL_REQUESTS`` turned real requests off."""
    if _override is not None:
        return _override
    return os.environ.get(ALLOW_ENV, "1").strip().lower() not in _OFF


def set_override(allowed: bool | None) -> bool | None:
    """Set the process-wide override (None: back to the environment); returns the old one."""
    global _override  # the one process-wide switch, see the module docstring
    with _lock:
        previous, _override = _override, allowed
    return previous


def check_model_requests(spec: str) -> None:
    """Raise :class:`ModelRequestsBlockedError` for backend *spec* while requests are off."""
    if not model_requests_allowed():
        raise ModelRequestsBlockedError(spec)
