"""The request guard: every HTTP request passes these checks before any route sees it.

In order: the ``Host`` header must name this server (a DNS-rebinding page sends its own
name); a browser ``Origin`` must be this server or a configured CORS origin; a bearer token,
when one is configured, must match (``hmac.compare_digest``, constant time); the body is
read here, whole, and refused past ``max_body_bytes`` (``Content-Length`` and chunked bodies
alike) or when its JSON nests deeper than ``max_json_depth`` — before FastAPI or pydantic
parse a byte of it. A refused request writes nothing. Then, when the server has CORS
origins, Starlette's CORS middleware. :func:`guarded` puts both in front of an app: the
FastAPI app's routes, and the plain turn streams (:mod:`agentkit.api.streams`), alike.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkit.api.errors import error_response
from agentkit.errors import UsageError

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "LOOPBACK_NAMES",
    "GuardPolicy",
    "RequestGuard",
    "check_token",
    "guarded",
    "is_loopback",
    "json_depth_exceeds",
    "parse_host_header",
]

DEFAULT_MAX_BODY_BYTES = 64 * 1024
DEFAULT_MAX_JSON_DEPTH = 32
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
_TOKEN_RE = re.compile(r"[\x21-\x7e]{8,512}")
_STRING_RE = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET_RE = re.compile(rb"[\[\]{}]")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _normalise(name: str) -> str:
    return name.strip().strip("[]").lower()


def check_token(token: str | None) -> str | None:
    """The token unchanged, or a :class:`UsageError` saying what a usable token looks like."""
    if token is None:
        return None
    if not _TOKEN_RE.fullmatch(token):
        raise UsageError(
            "a token is 8-512 printable ASCII characters without spaces "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


def parse_host_header(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` → (lowercased name, port); None when malformed."""
    value = value.strip()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, colon, port_text = value.partition(":")
        if colon and not port_text:
            return None
    if not name:
        return None
    if port_text:
        if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
            return None
        return name.lower(), int(port_text)
    return name.lower(), None


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """True when brackets outside JSON strings nest deeper than *limit* (a JSON bomb)."""
    if body.count(b"[") + body.count(b"{") <= limit:  # too few to nest that deep anywhere
        return False
    depth = 0
    for match in _BRACKET_RE.finditer(_STRING_RE.sub(b'""', body)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


@dataclass(frozen=True)
class GuardPolicy:
    """What the guard lets through. Build it with :meth:`for_server`."""

    allowed_hosts: frozenset[str]
    port: int | None = None
    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    open_paths: frozenset[str] = field(default_factory=lambda: frozenset({"/api/health"}))

    @classmethod
    def for_server(
        cls,
        *,
        host: str,
        port: int | None,
        token: str | None,
        allowed_hosts: Iterable[str] | None,
        cors_origins: Iterable[str],
        max_body_bytes: int,
        max_json_depth: int,
    ) -> GuardPolicy:
        """The policy for a server bound to *host*; refuses a non-loopback bind without a token."""
        token = check_token(token)
        if not is_loopback(host) and token is None:
            raise UsageError(
                f"refusing to serve on {host}, which is not a loopback address, without a "
                "token: pass --token (or set $AGENTKIT_TOKEN), or bind 127.0.0.1"
            )
        if max_body_bytes < 1 or max_json_depth < 1:
            raise UsageError("max_body_bytes and max_json_depth must be positive")
        names = set(LOOPBACK_NAMES)
        bound = _normalise(host)
        try:
            unspecified = ipaddress.ip_address(bound).is_unspecified
        except ValueError:
            unspecified = False
        if not unspecified:  # 0.0.0.0 / :: are bind addresses, never a name to answer to
            names.add(bound)
        names |= {_normalise(name) for name in allowed_hosts or ()}
        return cls(
            allowed_hosts=frozenset(names),
            port=port,
            token=token,
            cors_origins=tuple(cors_origins),
            max_body_bytes=max_body_bytes,
            max_json_depth=max_json_depth,
        )

    def host_allowed(self, name: str, port: int | None) -> bool:
        if _normalise(name) not in self.allowed_hosts:
            return False
        return port is None or self.port is None or port == self.port

    def origin_allowed(self, origin: str) -> bool:
        if origin in self.cors_origins:
            return True
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return self.host_allowed(parts.hostname, port)


class RequestGuard:
    """ASGI middleware enforcing a :class:`GuardPolicy` on every HTTP request."""

    def __init__(self, app: ASGIApp, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body, early = await self._read_body(headers, receive)
        if early is not None:
            if early != "disconnected":
                await self._too_large(scope, receive, send)
            return
        if body and json_depth_exceeds(body, self.policy.max_json_depth):
            response = error_response(
                400,
                "json_too_deep",
                f"the JSON body nests deeper than {self.policy.max_json_depth} levels; "
                "send a flatter document",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, replayed_receive(body, receive), send)

    def _refusal(self, scope: Scope, headers: Headers) -> ASGIApp | None:
        policy = self.policy
        host_header = headers.get("host", "")
        parsed = parse_host_header(host_header)
        if parsed is None or not policy.host_allowed(*parsed):
            names = ", ".join(sorted(policy.allowed_hosts))
            return error_response(
                400,
                "host_not_allowed",
                f"this server does not answer to Host {host_header!r}; use one of {names}"
                + (f" with port {policy.port}" if policy.port else "")
                + " (a name can be added with agentkit serve --allow-host NAME)",
            )
        origin = headers.get("origin")
        if origin is not None and not policy.origin_allowed(origin):
            return error_response(
                403,
                "origin_not_allowed",
                f"requests from the web origin {origin!r} are not allowed; start the server "
                "with that origin in cors_origins to allow it",
            )
        preflight = (
            scope["method"] == "OPTIONS"
            and origin is not None
            and "access-control-request-method" in headers
        )
        if policy.token is None or scope["path"] in policy.open_paths or preflight:
            return None
        scheme, _, supplied = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not supplied.strip():
            return error_response(
                401,
                "token_required",
                "this server requires a bearer token: send the header "
                "'Authorization: Bearer <token>' with the token it was started with",
                {"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(supplied.strip().encode(), policy.token.encode()):
            return error_response(
                401,
                "token_invalid",
                "the bearer token does not match the one this server was started with",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return None

    async def _read_body(self, headers: Headers, receive: Receive) -> tuple[bytes, str | None]:
        """The whole body, or (b"", reason) when it is too large or the client left."""
        limit = self.policy.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return b"", "too_large"
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"", "disconnected"
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return b"", "too_large"
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.policy.max_body_bytes
        response = error_response(
            413,
            "body_too_large",
            f"the request body is larger than {limit} bytes; send a shorter message",
            {"Connection": "close"},
        )
        await response(scope, receive, send)


def guarded(app: ASGIApp, policy: GuardPolicy) -> ASGIApp:
    """*app* behind the :class:`RequestGuard` (outermost) and, when *policy* names CORS
    origins, the CORS middleware (no origins: no CORS header is ever sent)."""
    if policy.cors_origins:
        app = CORSMiddleware(
            app,
            allow_origins=list(policy.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type"],
        )
    return RequestGuard(app, policy)


def replayed_receive(body: bytes, receive: Receive) -> Receive:
    """*receive* with *body*, already read, given again first."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
