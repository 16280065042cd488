"""Model calls: the one layer beneath the engines that makes, records and masks them.

Every model call anywhere — a planner or chat turn's, memory upkeep's, a compression sweep's,
a simulated user's, a judge's — is made through the call tracer, and every text any of them
writes or shows is masked by the one secret mask. Both live here, below ``planning``,
``memory`` and ``eval`` and beside ``models``, so each of those imports them downward:

===================================  ========================================================
:mod:`~agentkit.calls.tracer`        :class:`CallTracer`: the only way a model is called
                                     (timed, traced as a span, recorded, masked)
:mod:`~agentkit.calls.records`       :class:`CallRecord`: a turn's ``calls.jsonl`` lines
:mod:`~agentkit.calls.secrets`       :class:`SecretMask`: the one secret mask (journal,
                                     events, call records, transcripts, spans)
:mod:`~agentkit.calls.cancel`        :class:`CancelScope`: the switch a cancel interrupts
                                     a call with
:mod:`~agentkit.calls.errors`        how a turn's call ends early (failed, cancelled)
===================================  ========================================================

Nothing is imported here: the submodules are imported by name (the mask sits below
``telemetry``, which the tracer imports).
"""
