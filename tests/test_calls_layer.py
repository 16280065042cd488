"""The model-call layer's layout: one tracer and one mask, beneath the engines.

The call tracer, the call records and the one secret mask live in :mod:`agentkit.calls`;
``memory``, ``eval`` and ``models`` import them downward, never from ``planning``; the spans
mask with the one mask (no second masker in ``telemetry``), and each telemetry module stays
under 800 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentkit

PACKAGE = Path(agentkit.__file__).parent
#: what tracing is: the tracer, the call records, the cancel switch, the turn errors, the mask
TRACING = {
    "agentkit.planning.tracer",
    "agentkit.planning.call_records",
    "agentkit.planning.cancel",
    "agentkit.planning.errors",
    "agentkit.tools.secrets",
}
TRACING_NAMES = {
    "CallTracer",
    "ModelCall",
    "CallRecord",
    "CancelScope",
    "SecretMask",
    "TurnCancelledError",
    "TurnFailedError",
    "current_call",
    "error_text",
}


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    """(module, names imported from it) for every import in *path*."""
    found: list[tuple[str, set[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, {alias.name for alias in node.names}))
        elif isinstance(node, ast.Import):
            found += [(alias.name, set()) for alias in node.names]
    return found


def test_memory_eval_and_models_import_tracing_downward_not_from_planning() -> None:
    wrong: list[str] = []
    for part in ("memory", "eval", "models"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            for module, names in _imports(path):
                from_planning = module == "agentkit.planning" or module.startswith(
                    "agentkit.planning."
                )
                if module in TRACING or (from_planning and names & TRACING_NAMES):
                    wrong.append(f"{path.relative_to(PACKAGE)}: from {module} import {names}")
    assert not wrong, wrong


def test_the_tracer_and_the_mask_have_one_home_beneath_the_engines() -> None:
    for gone in ("planning/tracer.py", "planning/call_records.py", "tools/secrets.py"):
        assert not (PACKAGE / gone).exists(), gone
    for module in ("tracer", "records", "secrets", "cancel", "errors"):
        path = PACKAGE / "calls" / f"{module}.py"
        # the layer imports nothing above it: no engine, no memory, no eval, no tools
        for imported, _ in _imports(path):
            assert not imported.startswith(
                ("agentkit.planning", "agentkit.memory", "agentkit.eval", "agentkit.tools",
                 "agentkit.chat", "agentkit.agent", "agentkit.runtime")
            ), f"calls/{module}.py imports {imported}"  # fmt: skip


def test_the_spans_mask_with_the_one_mask() -> None:
    spans = PACKAGE / "telemetry" / "_spans.py"
    imported = dict(_imports(spans))
    assert "SecretMask" in imported.get("agentkit.calls.secrets", set())
    # no masker of its own: nothing there replaces a secret in a text
    text = spans.read_text(encoding="utf-8")
    assert (
        ".replace(secret" not in text and "def _masked(" not in text and "class _Values" not in text
    )
    for path in sorted((PACKAGE / "telemetry").glob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines < 800, f"{path.name}: {lines} lines"
    # and nowhere else in agentkit does a module mask by replacing secret values itself
    own = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path != PACKAGE / "calls" / "secrets.py"
        and "replace(secret, mask_value(secret))" in path.read_text(encoding="utf-8")
    ]
    assert not own, own


def test_the_one_mask_masks_json_texts_inside_and_learns_apart() -> None:
    from agentkit.calls.secrets import SecretMask

    turn = SecretMask()
    trace = turn.apart()
    turn.learn(["K3Y-live-0123456789"])  # learned by the turn after the trace began
    assert trace.text("key K3Y-live-0123456789") == "key ****6789"
    trace.learn_json('{"api_key": "ZZ-secret-4242", "n": 1}')  # a JSON text: read inside
    assert trace.text("ZZ-secret-4242") == "****4242"
    assert turn.text("ZZ-secret-4242") == "ZZ-secret-4242"  # the trace learned it, not the turn
    masked = trace.json_text('{"token": "abc", "note": "K3Y-live-0123456789"}')
    assert masked == '{"token": "****", "note": "****6789"}'
    assert trace.deep({"args": '{"password": "hunter22"}'}) == {"args": '{"password": "****"}'}
    assert SecretMask.of(["V4LUE-1"]).text("a V4LUE-1 b") == "a **** b"
    assert SecretMask.of(trace) is trace
