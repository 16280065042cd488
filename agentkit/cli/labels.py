"""``agentkit label``, ``labels``, ``agreement`` and ``scan``: a person's labels on stored runs,
a judge's agreement with them, and the transcript scanners — all over a results table,
without running anything again.

Labels and findings are kept beside the table (``runs.labels.jsonl``,
``runs.findings.parquet``); a run the table does not have, a table without transcripts (for
``scan``) or an unknown judge or scanner is one line on stderr, exit status 2, nothing
written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit._extras import require
from agentkit.cli._app import JsonFlag, app, clean_errors, data_root, print_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["agreement_command", "label_command", "labels_command", "scan_command"]

ResultsArg = Annotated[
    Path, typer.Argument(help="A results table (.parquet or .csv) written by agentkit eval.")
]


@app.command("label")
def label_command(
    results: ResultsArg,
    run: Annotated[str, typer.Argument(help="The run's id, e.g. desk_create_trader_en--p0.")],
    label: Annotated[str, typer.Argument(help="pass, fail, or a score.")],
    note: Annotated[str, typer.Option("--note", help="Why (shown with disagreements).")] = "",
    who: Annotated[
        str | None, typer.Option("--who", help="Who labels (default: $AGENTKIT_USER, else you).")
    ] = None,
) -> None:
    """Label one run of a results table (kept beside it, in RESULTS.labels.jsonl)."""
    with clean_errors():
        require("eval", "agentkit label", "pandas")
        from agentkit.eval.labels import add_label, labels_path

        made = add_label(results, run, label, note=note, who=who)
        typer.echo(f"labelled {made.run} {made.verdict} (in {labels_path(results)})")


@app.command("labels")
def labels_command(
    results: ResultsArg,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the table with its label columns (.parquet or .csv)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the labels of a results table, and the runs still unlabelled."""
    with clean_errors():
        require("eval", "agentkit labels", "pandas")
        from agentkit.eval.labels import load_labels, unlabelled, with_labels
        from agentkit.eval.results import check_output_path, load_results, run_ids, save_results

        target = check_output_path(out) if out is not None else None
        frame = load_results(results)
        labels = load_labels(results)
        runs = run_ids(frame)
        missing = unlabelled(runs, labels)
        if as_json:
            kept = [labels[run].model_dump(mode="json") for run in runs if run in labels]
            print_json({"labels": kept, "unlabelled": missing})
        else:
            for run in runs:
                if run in labels:
                    item = labels[run]
                    note = f"  {item.note}" if item.note else ""
                    when = item.when.strftime("%Y-%m-%d %H:%M")
                    typer.echo(f"{run}  {item.verdict}  {item.who} {when}{note}")
            typer.echo(f"{len(runs) - len(missing)} of {len(runs)} runs labelled")
            if missing:
                typer.echo(f"next unlabelled: {missing[0]}")
        if target is not None:
            save_results(with_labels(frame, labels), target)
            typer.echo(f"wrote {target} ({len(frame)} rows with their labels)")


@app.command("agreement")
def agreement_command(
    results: ResultsArg,
    judge: Annotated[
        str, typer.Option("--judge", help="The judge's name (its judge_NAME column).")
    ],
    seed: Annotated[int | None, typer.Option("--seed", help="The bootstrap's seed.")] = None,
    min_runs: Annotated[
        int | None,
        typer.Option("--min-runs", min=2, help="Runs labelled and judged a figure needs."),
    ] = None,
    labels_of: Annotated[
        Path | None,
        typer.Option(
            "--labels-of",
            help="Use the labels of this results table (e.g. the one RESULTS was re-scored "
            "from) instead of RESULTS' own.",
        ),
    ] = None,
) -> None:
    """A judge's agreement with your labels: agreement rate, Cohen's kappa with a bootstrap 95%
    interval (the seed printed), the confusion matrix and the runs where you disagree."""
    with clean_errors():
        require("eval", "agentkit agreement", "pandas")
        from agentkit.eval.agreement import MIN_LABELLED, judge_agreement
        from agentkit.eval.labels import load_labels
        from agentkit.eval.stats import DEFAULT_SEED

        result = judge_agreement(
            results,
            judge,
            labels=load_labels(labels_of) if labels_of is not None else None,
            seed=DEFAULT_SEED if seed is None else seed,
            min_runs=MIN_LABELLED if min_runs is None else min_runs,
        )
        typer.echo(result.report())


@app.command("scan")
def scan_command(
    ctx: typer.Context,
    results: ResultsArg,
    scanners: Annotated[
        list[str] | None,
        typer.Option(
            "--scanner",
            help="A built-in scanner or module:function (repeatable; default: every built-in).",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Scan every run's transcript for rare failures; print the findings per scanner and run,
    keep them beside the table (RESULTS.findings.*) and count them in its findings column.

    The runs' agents are read from the data root (--data-dir): their side-effecting tools and
    their secret store."""
    with clean_errors():
        require("eval", "agentkit scan", "pandas")
        from agentkit.eval.results import load_results, save_results
        from agentkit.eval.scanners import (
            AgentContexts,
            findings_path,
            resolve_scanners,
            save_findings,
            scan_results,
            with_finding_counts,
        )

        chosen = resolve_scanners(scanners or None)
        frame = load_results(results)
        contexts = AgentContexts(data_root(ctx))
        findings = scan_results(frame, chosen, contexts)
        for agent in contexts.missing:
            typer.echo(
                f"agentkit: note: no agent {agent!r} under {contexts.data_dir}: its runs are "
                "scanned without its secret store, and with only the tools they asked consent "
                "for as side-effecting",
                err=True,
            )
        if as_json:
            print_json({"findings": findings.to_dict("records")})
        else:
            typer.echo(_findings_text(findings, list(chosen)))
        save_findings(findings, results)
        save_results(with_finding_counts(frame, findings), results)
        typer.echo(
            f"wrote {findings_path(results)} ({len(findings)} findings) and the findings "
            f"column of {results}",
            err=as_json,
        )


def _findings_text(findings: pd.DataFrame, scanners: list[str]) -> str:
    lines: list[str] = []
    for name in scanners:
        mine = findings[findings["scanner"] == name]
        if not len(mine):
            lines.append(f"{name}: no findings")
            continue
        runs = mine["run"].nunique()
        lines.append(f"{name}: {len(mine)} finding(s) in {runs} run(s)")
        for run, group in mine.groupby("run", sort=False):
            lines.append(f"  {run}")
            for item in group.to_dict("records"):
                where = f"turn {item['turn']}, event {item['event']} ({item['event_type']})"
                if int(item["event"]) < 0:
                    where = item["event_type"] or "the run"
                lines.append(f"    [{item['severity']}] {where}: {item['sentence']}")
    return "\n".join(lines)
