"""One error shape for every HTTP failure, and the one table mapping agentkit errors to it.

Every response that is not a success carries ``{"error": {"code": …, "message": …}}``: a
stable machine ``code`` and a sentence a person can act on. Handlers never build error
bodies themselves; they raise, and :func:`install_error_handlers` turns the exception into
that shape here, so the mapping cannot drift between routes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from agentkit.errors import (
    AgentkitError,
    AgentNotFoundError,
    ApprovalDecidedError,
    ApprovalNotFoundError,
    ConfigError,
    ConversationBusyError,
    ConversationNotFoundError,
    InvalidApprovalArgsError,
    InvalidIdError,
    MissingExtraError,
    ModelError,
    ModelSpecError,
    StoreError,
    TurnNotFinishedError,
    TurnNotFoundError,
    UsageError,
)
from agentkit.store import StoreUnavailableError, VersionConflictError

__all__ = [
    "ApiError",
    "ErrorBody",
    "ErrorDetail",
    "error_response",
    "install_error_handlers",
    "response_for",
    "status_for",
]

log = logging.getLogger("agentkit.api")


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="a stable identifier, e.g. conversation_busy")
    message: str = Field(description="what went wrong and what to do about it")


class ErrorBody(BaseModel):
    """The body of every error response."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


class ApiError(Exception):
    """An HTTP-level refusal raised by the API itself (not by the agentkit core)."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        super().__init__(message)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


# (exception type, HTTP status, code): the first matching row wins, so subclasses come first.
_TABLE: tuple[tuple[type[BaseException], int, str], ...] = (
    (InvalidIdError, 422, "invalid_id"),
    (AgentNotFoundError, 404, "agent_not_found"),
    (ConversationNotFoundError, 404, "conversation_not_found"),
    (TurnNotFoundError, 404, "turn_not_found"),
    (TurnNotFinishedError, 422, "turn_not_finished"),
    (ApprovalNotFoundError, 404, "approval_not_found"),
    (ApprovalDecidedError, 409, "approval_decided"),
    (InvalidApprovalArgsError, 422, "invalid_approval_args"),
    (ConfigError, 500, "agent_config_invalid"),
    (ModelSpecError, 503, "model_unavailable"),
    (MissingExtraError, 503, "extra_missing"),
    (UsageError, 422, "invalid_request"),
    (ConversationBusyError, 409, "conversation_busy"),
    (VersionConflictError, 409, "version_conflict"),
    (StoreUnavailableError, 503, "store_unavailable"),
    (StoreError, 500, "store_error"),
    (ModelError, 502, "model_error"),
    (AgentkitError, 500, "agentkit_error"),
)


def status_for(error: BaseException) -> tuple[int, str]:
    """The HTTP status and error code an exception maps to."""
    for kind, status, code in _TABLE:
        if isinstance(error, kind):
            return status, code
    return 500, "internal_error"


def _message_for(error: AgentkitError, status: int) -> str:
    text = str(error)
    if isinstance(error, AgentNotFoundError):
        return f"{text}; GET /api/agent/list names the agents this server has"
    if isinstance(error, ConversationNotFoundError):
        return (
            f"{text}; GET /api/agent/{error.agent_id}/conversations lists them, "
            "or leave out conversationId to start a new one"
        )
    if status >= 500 and not isinstance(error, ConfigError | ModelSpecError | MissingExtraError):
        return f"{text} (the server could not complete the request; see its log)"
    return text


def _describe_validation(error: RequestValidationError) -> str:
    problems: list[str] = []
    whole_body = False
    for item in error.errors()[:5]:
        location = tuple(item.get("loc", ()))
        whole_body = whole_body or location == ("body",)
        where = ".".join(str(part) for part in location if part != "body") or "body"
        problems.append(f"{where}: {item.get('msg', 'invalid')}")
    hint = " (send a JSON object with Content-Type: application/json)" if whole_body else ""
    return (
        "the request does not match the API schema (see /openapi.json): "
        + "; ".join(problems)
        + hint
    )


_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def _leaf_routes(routes: Iterable[Any]) -> Iterator[Any]:
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI's include_router wrapper
        if included is not None:
            yield from _leaf_routes(included.routes)
        else:
            yield route


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in _leaf_routes(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def response_for(error: Exception) -> JSONResponse:
    """The response an exception raised by a route becomes (an agentkit error through the
    table, an :class:`ApiError` as it says, anything else a logged 500)."""
    if isinstance(error, AgentkitError):
        status, code = status_for(error)
        if status >= 500:
            log.error("%s: %s", code, error)
        return error_response(status, code, _message_for(error, status))
    if isinstance(error, ApiError):
        return error_response(error.status, error.code, error.message, error.headers)
    log.exception("unexpected error", exc_info=error)
    return error_response(
        500, "internal_error", "the server failed unexpectedly; its log has the details"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Make every failure, expected or not, an :class:`ErrorBody` response."""

    async def on_error(_request: Request, error: Exception) -> JSONResponse:
        return response_for(error)

    async def on_validation(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return error_response(422, "invalid_request", _describe_validation(error))

    async def on_http(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        status = error.status_code
        if status == 404:
            message = f"no route {request.method} {request.url.path}; /openapi.json lists them"
        elif status == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(error.detail)
        headers: dict[str, Any] | None = getattr(error, "headers", None)
        if status == 405:  # name every method of the path, not just the first route's
            headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(request))}
        return error_response(status, _HTTP_CODES.get(status, "http_error"), message, headers)

    app.add_exception_handler(AgentkitError, on_error)
    app.add_exception_handler(ApiError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_error)
