"""Transcript scanners: functions over a stored run that flag rare failures.

A scanner reads one run's :class:`~agentkit.eval.transcript.Transcript` (never runs it again)
and returns :class:`Finding` values: a kind, a severity, the event it points at, a sentence.
Seven are built in (:data:`BUILTIN_SCANNERS`, described in
:mod:`~agentkit.eval.scanners.builtin`); your own is any function
``(transcript, context) -> Iterable[Finding]``, named ``module:function``.

    from agentkit.eval.scanners import scan_results, with_finding_counts
    findings = scan_results(df, context=ScanContext.of(side_effect_tools={"delete_note"}))
    df = with_finding_counts(df, findings)          # the ``findings`` column

``agentkit scan RESULTS [--scanner NAME…]`` prints them per scanner and run and keeps the
findings table beside the results (:func:`findings_path`).
"""

from __future__ import annotations

from agentkit.eval.scanners.builtin import (
    BUILTIN_SCANNERS,
    false_success,
    repeated_call,
    repeated_question,
    secret_leak,
    unapproved_side_effect,
    write_for_read,
)
from agentkit.eval.scanners.faithfulness import unfaithful_answer
from agentkit.eval.scanners.findings import (
    FINDING_COLUMNS,
    Finding,
    ScanContext,
    Scanner,
    Severity,
)
from agentkit.eval.scanners.scan import (
    FINDINGS_COLUMN,
    AgentContexts,
    agent_scan_context,
    findings_path,
    load_findings,
    resolve_scanners,
    save_findings,
    scan,
    scan_results,
    with_finding_counts,
)

__all__ = [
    "BUILTIN_SCANNERS",
    "FINDINGS_COLUMN",
    "FINDING_COLUMNS",
    "AgentContexts",
    "Finding",
    "ScanContext",
    "Scanner",
    "Severity",
    "agent_scan_context",
    "false_success",
    "findings_path",
    "load_findings",
    "repeated_call",
    "repeated_question",
    "resolve_scanners",
    "save_findings",
    "scan",
    "scan_results",
    "secret_leak",
    "unapproved_side_effect",
    "unfaithful_answer",
    "with_finding_counts",
    "write_for_read",
]
