"""Running scanners over stored runs, and the findings table kept beside the results.

:func:`scan` runs scanners over one transcript; :func:`scan_results` over every run of a
results table, giving the findings table (one row per finding, columns
:data:`~agentkit.eval.scanners.findings.FINDING_COLUMNS`); :func:`with_finding_counts` adds
the ``findings`` column (how many each run has) to the results table. The findings table is
kept beside the results (``runs.parquet`` → ``runs.findings.parquet``: :func:`findings_path`).

Scanners are named: a built-in name (:data:`~agentkit.eval.scanners.builtin.BUILTIN_SCANNERS`)
or ``module:function`` for one of your own (as Python toolsets are named), a function
``(transcript, context) -> Iterable[Finding]``. :func:`agent_scan_context` reads the
:class:`~agentkit.eval.scanners.findings.ScanContext` of an agent in a data root.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.errors import UsageError
from agentkit.eval.results import require_pandas, results_beside, run_ids, save_results
from agentkit.eval.scanners.builtin import BUILTIN_SCANNERS
from agentkit.eval.scanners.findings import FINDING_COLUMNS, Finding, ScanContext, Scanner
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, Transcript, load_transcripts

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FINDINGS_COLUMN",
    "AgentContexts",
    "agent_scan_context",
    "findings_path",
    "load_findings",
    "resolve_scanners",
    "save_findings",
    "scan",
    "scan_results",
    "with_finding_counts",
]

#: the results table's column counting each run's findings
FINDINGS_COLUMN = "findings"

ContextFor = Callable[[Transcript, Mapping[str, object]], ScanContext]
"""A context per run: given its transcript and its row of the results table."""


def resolve_scanners(names: Sequence[str] | None = None) -> dict[str, Scanner]:
    """The scanners *names* name (default: every built-in one), by name: a built-in name or
    ``module:function`` (an unknown name or a function that cannot be imported is a
    :class:`UsageError` naming it)."""
    if not names:
        return dict(BUILTIN_SCANNERS)
    chosen: dict[str, Scanner] = {}
    for name in names:
        if name in BUILTIN_SCANNERS:
            chosen[name] = BUILTIN_SCANNERS[name]
        elif ":" in name:
            chosen[name] = _imported(name)
        else:
            known = ", ".join(BUILTIN_SCANNERS)
            raise UsageError(f"no scanner named {name!r} (built in: {known}; or module:function)")
    return chosen


def _imported(spec: str) -> Scanner:
    module_name, _, attribute = spec.partition(":")
    module_name, attribute = module_name.strip(), attribute.strip()
    if not module_name or not attribute:
        raise UsageError(f"scanner {spec!r}: give module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"scanner {spec!r}: cannot import {module_name}: {error}") from None
    value: object = module
    for part in attribute.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise UsageError(f"scanner {spec!r}: {module_name} has no {attribute!r}")
    if not callable(value):
        raise UsageError(f"scanner {spec!r} is not a function")
    return value  # a callable: its findings are checked in scan


def scan(
    transcript: Transcript,
    scanners: Mapping[str, Scanner] | Sequence[str] | None = None,
    context: ScanContext | None = None,
) -> list[Finding]:
    """Every finding *scanners* (default: the built-in ones) make in one run, in scanner
    order, each with its ``run`` and ``scanner`` filled in. A scanner that returns something
    other than findings is a :class:`UsageError` naming it."""
    chosen = scanners if isinstance(scanners, Mapping) else resolve_scanners(scanners)
    given = context if context is not None else ScanContext()
    found: list[Finding] = []
    for name, scanner in chosen.items():
        for finding in scanner(transcript, given):
            if not isinstance(finding, Finding):
                raise UsageError(
                    f"scanner {name!r} returned a {type(finding).__name__}, not a Finding"
                )
            found.append(finding.model_copy(update={"run": transcript.run, "scanner": name}))
    return found


def scan_results(
    results: pd.DataFrame,
    scanners: Mapping[str, Scanner] | Sequence[str] | None = None,
    context: ScanContext | ContextFor | None = None,
) -> pd.DataFrame:
    """The findings table of every run of *results* that kept a transcript (one row per
    finding). *context*: one for every run, or a function giving each run's (from its
    transcript and its row). A table without transcripts is a :class:`UsageError`."""
    require_pandas()
    import pandas as pd

    if TRANSCRIPT_COLUMN not in results.columns:
        raise UsageError(
            "this results table has no transcript column (written before transcripts were "
            "kept): nothing to scan; run the sweep again to keep them"
        )
    chosen = scanners if isinstance(scanners, Mapping) else resolve_scanners(scanners)
    rows: list[dict[str, object]] = []
    records: list[dict[str, object]] = [
        {str(key): value for key, value in record.items()} for record in results.to_dict("records")
    ]
    for transcript, record in zip(load_transcripts(results), records, strict=True):
        if transcript is None:
            continue
        given = context(transcript, record) if callable(context) else context
        given = (given if given is not None else ScanContext()).for_row(record)
        rows += [finding.model_dump(exclude={"v"}) for finding in scan(transcript, chosen, given)]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS)).astype(
        {"turn": "int64", "event": "int64"}
    )


def with_finding_counts(results: pd.DataFrame, findings: pd.DataFrame) -> pd.DataFrame:
    """*results* with the ``findings`` column: how many findings each run has (0 for none)."""
    counts = findings["run"].value_counts().to_dict() if len(findings) else {}
    table = results.copy()
    table[FINDINGS_COLUMN] = [int(counts.get(run, 0)) for run in run_ids(results)]
    return table


def findings_path(results: Path | str) -> Path:
    """Where the findings table of the results table *results* is kept."""
    return results_beside(results, "findings")


def save_findings(findings: pd.DataFrame, results: Path | str) -> Path:
    """Write *findings* beside the results table *results*; returns the path written."""
    return save_results(findings, findings_path(results))


def load_findings(results: Path | str) -> pd.DataFrame:
    """The findings table kept beside *results* (a :class:`UsageError` when there is none:
    run ``agentkit scan`` first)."""
    require_pandas()
    import pandas as pd

    path = findings_path(results)
    if not path.is_file():
        raise UsageError(f"no findings beside {results} (looked for {path}): run agentkit scan")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, keep_default_na=False).astype({"turn": "int64", "event": "int64"})


# -- an agent's context --------------------------------------------------------------------------


def agent_scan_context(data_dir: Path | str, agent_id: str) -> ScanContext:
    """The scan context of the agent *agent_id* under *data_dir*: its side-effecting tools
    (as its tools declare them, and as its config sets them: a config that makes a write a
    read does not hide it from the scan), the values of its secret store, and its toolsets'
    secret patterns (what they match in what a run's user typed is a secret of that run).

    The agent's folder is read from a temporary copy: scanning writes nothing under the data
    root."""
    from agentkit.agent_folder import AgentFolder
    from agentkit.calls.secrets import SecretMask
    from agentkit.tools.toolbox import AgentTools

    source = AgentFolder.load(Path(data_dir), agent_id)
    with tempfile.TemporaryDirectory(prefix="agentkit-scan-") as scratch:
        copy = Path(scratch) / "agents" / agent_id
        shutil.copytree(
            source.path, copy, ignore=shutil.ignore_patterns("conversations", "logs", "*.lock")
        )
        folder = AgentFolder.load(Path(scratch), agent_id)
        with AgentTools.load(folder) as tools:
            registry = tools.registry
            writes = {name for name in registry.names() if registry.get(name).side_effect}
            for toolset in tools.toolsets:
                writes |= {tool.name for tool in toolset.tools() if tool.side_effect}
            secrets = list(registry.secrets()) if registry.secrets is not None else []
            patterns = [p for toolset in tools.toolsets for p in toolset.secret_patterns()]
    return ScanContext.of(writes, secrets, SecretMask.compile(patterns))


class AgentContexts:
    """Each run's scan context, for :func:`scan_results`: its agent's
    (:func:`agent_scan_context`), read once per agent from the data root *data_dir*. For an
    agent the data root lacks (named in :attr:`missing`), a run is scanned without a secret
    store, with the tools it asked consent for as its side-effecting ones (a consent is only
    asked for those)."""

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir)
        self.missing: list[str] = []
        self._made: dict[str, ScanContext | None] = {}

    def of(self, agent: str) -> ScanContext | None:
        """The agent's context (None: the data root has no such agent)."""
        from agentkit.errors import AgentNotFoundError, InvalidIdError

        if agent not in self._made:
            try:
                self._made[agent] = agent_scan_context(self.data_dir, agent)
            except (AgentNotFoundError, InvalidIdError):
                self._made[agent] = None
                self.missing.append(agent)
        return self._made[agent]

    def __call__(self, transcript: Transcript, record: Mapping[str, object]) -> ScanContext:
        from agentkit.eval.reading import read_run

        found = self.of(str(record.get("agent", "")))
        if found is not None:
            return found
        asked = {event.tool_name for turn in read_run(transcript).turns for event in turn.consents}
        return ScanContext.of(asked)
