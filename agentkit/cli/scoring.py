"""Re-scoring a stored results table without running it again: ``agentkit score``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit._extras import require
from agentkit.cli._app import app, clean_errors, data_root, exporting
from agentkit.errors import UsageError

if TYPE_CHECKING:
    from agentkit.eval.scenario import Scenario

__all__ = ["score_command"]


@app.command("score")
def score_command(
    ctx: typer.Context,
    results: Annotated[Path, typer.Argument(help="The results table (.parquet or .csv).")],
    out: Annotated[
        Path, typer.Option("--out", help="Write the re-scored table here (.parquet or .csv).")
    ],
    expectations: Annotated[
        bool,
        typer.Option(
            "--expectations",
            help="Re-check the expectations (alone: keep the stored judgements as they are).",
        ),
    ] = False,
    judges: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            help="Ask this judge again: a judge of the scenarios by name, or a YAML/JSON file "
            "of judges for every run (repeatable; default: every judge of the scenarios).",
        ),
    ] = None,
    scanners: Annotated[
        list[str] | None,
        typer.Option(
            "--scan",
            help="Run this scanner over the transcripts: a built-in name, module:function, or "
            "'all' (repeatable); the findings go beside --out.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Who grades (a judge's own model wins; default: each run's model; "
            "'scripted': each judge's script).",
        ),
    ] = None,
    scenarios: Annotated[
        list[Path] | None,
        typer.Option(
            "--scenarios",
            help="Score by these scenario files or folders, or tau2:DOMAIN (default: the "
            "scenario each run's transcript kept; DATA_DIR/scenarios for a table written "
            "before it kept them).",
        ),
    ] = None,
) -> None:
    """Score a stored table again from its transcripts into a new table: expectations, judges
    and scanners; no agent model is called, and a judge is asked again only where what it
    sees (transcript, rubric, model) changed. With none of --expectations, --judge, --scan:
    the expectations and every judge."""
    with clean_errors(), exporting():
        require("eval", "agentkit score", "pandas", "yaml")
        from agentkit.eval import Judge, check_output_path, load_results, save_results
        from agentkit.eval.scoring import load_judges, rescore

        target = check_output_path(out)
        if target.resolve() == results.resolve():
            raise UsageError("--out is a new table: give another file than RESULTS")
        frame = load_results(results)
        root = data_root(ctx)
        chosen: list[str | Judge] | None = None
        if judges:
            chosen = []
            for item in judges:
                if Path(item).suffix in (".yaml", ".yml", ".json"):
                    chosen += load_judges(item)
                else:
                    chosen.append(item)
        for path in scenarios or ():
            if not str(path).startswith("tau2:") and not path.exists():
                raise UsageError(f"no scenario file or folder at {path} (--scenarios)")
        default = root / "scenarios"
        rescored = rescore(
            frame,
            _with_tau2(scenarios, judge_model) if scenarios else None,
            fallback=default if default.is_dir() else None,
            judges=chosen,
            # --expectations or --scan alone: the stored judgements are kept as they are
            expectations_only=not judges and (expectations or bool(scanners)),
            judge_model=judge_model,
            # 'all' (or only names of nothing): every built-in scanner
            scanners=None if not scanners else [name for name in scanners if name != "all"],
            data_dir=root,
        )
        typer.echo(rescored.report())
        save_results(rescored.table, target)
        if rescored.findings is not None:
            from agentkit.eval.scanners import save_findings

            saved = save_findings(rescored.findings, target)
            typer.echo(f"wrote {saved} ({len(rescored.findings)} findings)")
        table = rescored.table
        typer.echo(f"wrote {target} ({len(table)} rows, {len(table.columns)} columns)")
        from agentkit.eval.labels import copy_labels

        labels = copy_labels(results, target)  # agreement on NEW reads RESULTS' labels
        if labels is not None:
            typer.echo(f"wrote {labels} (the labels of {results})")


def _with_tau2(paths: list[Path], judge_model: str | None) -> list[Path] | list[Scenario]:
    """*paths*, with every task of a ``tau2:DOMAIN`` among them as a scenario (its
    natural-language assertions graded by *judge_model*, when one is given)."""
    suites = [str(path) for path in paths if str(path).startswith("tau2:")]
    if not suites:
        return list(paths)
    from agentkit.eval import load_scenarios
    from agentkit.eval.tau2.suite import every_scenario

    files = [path for path in paths if not str(path).startswith("tau2:")]
    judge = judge_model if judge_model != "scripted" else None
    loaded = every_scenario(suites, judge_model=judge)
    return [*loaded, *(load_scenarios(files) if files else [])]
