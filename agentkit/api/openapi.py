"""The OpenAPI document: FastAPI's, plus what it cannot infer about the event stream.

FastAPI documents the chat route's 200 as ``text/event-stream`` but knows nothing of the
events. Here each event is described as OpenAPI 3.1 reads an event-stream schema — an object
with ``event``, ``data``, ``id`` — where ``data`` is JSON matching one of the typed events
(the pydantic schemas of :data:`agentkit.events.EVENT_ADAPTER`, hoisted into
``components.schemas``). A client, or schemathesis, can then check every event it receives.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from agentkit.events import EVENT_ADAPTER

__all__ = ["CHAT_PATH", "build_openapi", "event_stream_schema"]

CHAT_PATH = "/api/agent/{agentId}/chat"
_REF_TEMPLATE = "#/components/schemas/{model}"


def event_stream_schema(components: dict[str, Any]) -> dict[str, Any]:
    """The schema of one SSE event of a turn; adds the event models to *components*."""
    events = EVENT_ADAPTER.json_schema(ref_template=_REF_TEMPLATE, mode="serialization")
    for name, definition in events.pop("$defs", {}).items():
        components.setdefault(name, definition)  # shared models (Usage) are the same class
    components["AgentEvent"] = events
    types = sorted(events["discriminator"]["mapping"])
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": types, "description": "the event's type"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": _REF_TEMPLATE.format(model="AgentEvent")},
            },
            "id": {"type": "string", "description": "messageId:sequence"},
            "retry": {"type": "integer", "minimum": 0},
        },
    }


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document for *app*, with the chat route's event stream described."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    components = document.setdefault("components", {}).setdefault("schemas", {})
    ok = document["paths"][CHAT_PATH]["post"]["responses"]["200"]
    ok["content"] = {"text/event-stream": {"schema": event_stream_schema(components)}}
    app.openapi_schema = document
    return document
