"""Serving and studying agents: the HTTP API, the ACP agent on stdio, evaluation sweeps."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit._extras import require
from agentkit.agent_folder import resolve_data_dir
from agentkit.cli._app import (
    AgentArg,
    ModelOption,
    StoreOption,
    app,
    clean_errors,
    data_root,
    exporting,
)
from agentkit.cli.report import ComparePoints, _tables_to_compare
from agentkit.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from agentkit.eval import Scenario, SweepInterrupted

__all__ = ["acp_command", "compare_command", "eval_command", "serve_command"]

ExcludeSimOption = Annotated[
    bool,
    typer.Option(
        "--exclude-sim-deviations",
        help="Leave out the runs whose simulated user deviated (sim_user_ok false), saying how "
        "many, before comparing.",
    ),
]


@app.command("serve")
def serve_command(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to bind.", min=1, max=65535)] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="AGENTKIT_TOKEN",
            show_envvar=True,
            help="Require 'Authorization: Bearer TOKEN' on every route but /api/health.",
        ),
    ] = None,
    model: ModelOption = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", help="Another name clients may use in the Host header (repeatable)."
        ),
    ] = None,
    store: StoreOption = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Server processes on the port, sharing the store (the files or PostgreSQL).",
        ),
    ] = 1,
) -> None:
    """Serve the agents over HTTP: the /api/agent/… routes, chat as server-sent events."""
    with clean_errors(), exporting():
        from agentkit.api import serve  # FastAPI and uvicorn load only for this command

        serve(
            data_root(ctx),
            host=host,
            port=port,
            token=token or None,
            model=model,
            allowed_hosts=allow_host,
            announce=lambda line: typer.echo(line, err=True),
            store=store,
            workers=workers,
        )


@app.command("acp")
def acp_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    model: ModelOption = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir", help="Data root (overrides the global --data-dir).", file_okay=False
        ),
    ] = None,
    store: StoreOption = None,
    no_replay: Annotated[
        bool,
        typer.Option(
            "--no-replay",
            help="session/load restores a conversation without replaying its history (for "
            "clients that keep their own transcript, e.g. jupyter-ai; config: acp.replay).",
        ),
    ] = False,
) -> None:
    """Serve the agent over the Agent Client Protocol on stdio (Zed, JetBrains, marimo, jupyter-ai).

    Only protocol messages go to stdout; logs go to stderr. Runs until the client closes stdin.
    A startup error (unknown agent, bad config.json or --model) is the answer to the client's
    initialize, then the exit status is 2.
    """
    with clean_errors(), exporting():
        from agentkit.acp_server import serve_stdio  # the ACP edge loads only for this command

        root = resolve_data_dir(data_dir) if data_dir is not None else data_root(ctx)
        replay = False if no_replay else None  # None: the agent's acp.replay decides
        serve_stdio(agent_id, data_dir=root, model=model, store=store, replay=replay)


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    scenarios: Annotated[
        list[Path],
        typer.Argument(
            help="Scenario files, or folders of them (not recursive), or public suites: "
            "bfcl:CATEGORY, tau2:DOMAIN (bfcl:A,B / tau2:airline,retail for several)."
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="'scripted' (each scenario's own replies) or a model spec such as llama "
            "(default: each agent's config.json).",
        ),
    ] = None,
    assignments: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="KEY=VALUE in config.json for every run, e.g. compression.keep_recent=4."
        ),
    ] = None,
    axes: Annotated[
        list[str] | None,
        typer.Option("--grid", help="KEY=V1,V2,… to sweep (repeatable: the runs are the product)."),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Local worker processes.")] = 1,
    executor: Annotated[
        str, typer.Option("--executor", help="local, or dask://HOST:PORT (a Dask scheduler).")
    ] = "local",
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the results table (.parquet or .csv).")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", help="Only scenarios with this tag (repeatable).")
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Keep each run's data root under this folder, to browse."),
    ] = None,
    turn_timeout: Annotated[
        float | None, typer.Option("--turn-timeout", help="Seconds one turn may take.")
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")
    ] = True,
    retries: Annotated[
        int, typer.Option("--retries", min=0, help="Run a run that ended in an error again.")
    ] = 0,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Keep the finished runs of an existing --out table; run the rest."
        ),
    ] = False,
    repeat: Annotated[
        int,
        typer.Option("--repeat", min=1, help="Run each scenario at each point K times (pass^k)."),
    ] = 1,
    user_model: Annotated[
        str | None,
        typer.Option(
            "--user-model",
            help="Who plays a simulated user: a model spec, or 'scripted' for the scenario's "
            "user_script (default: the run's model).",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Tokens one run may spend.")
    ] = None,
    max_model_calls: Annotated[
        int | None, typer.Option("--max-model-calls", min=1, help="Model calls one run may make.")
    ] = None,
    max_seconds: Annotated[
        float | None, typer.Option("--max-seconds", help="Seconds one run may take.")
    ] = None,
    sweep_max_tokens: Annotated[
        int | None,
        typer.Option(
            "--sweep-max-tokens", min=1, help="No run starts once the sweep spent this many."
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option("--concurrency", min=1, help="Runs going at once in each process (async)."),
    ] = 1,
    store: StoreOption = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1, help="BFCL, tau2: a sample of N items per category / domain."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="BFCL, tau2: the sample's seed.")] = 0,
    split: Annotated[
        str, typer.Option("--split", help="tau2: the task split (tau2's own: base, train, test …).")
    ] = "base",
    prompt_mode: Annotated[
        bool,
        typer.Option(
            "--prompt-mode",
            help="BFCL: also run the model alone in BFCL's prompt mode (same table).",
        ),
    ] = False,
    memory_context: Annotated[
        str,
        typer.Option(
            "--memory-context",
            help="BFCL memory: compressed (replay, compress, ask restored), whole, none.",
        ),
    ] = "compressed",
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="BFCL, tau2: the agent items run on (bfcl-001; tau2-DOMAIN, tau2's own).",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Who grades the scenarios' judges (expect: judges): a model spec, or "
            "'scripted' for each judge's script (default: the run's model).",
        ),
    ] = None,
    allow_errors: Annotated[
        bool,
        typer.Option(
            "--allow-errors",
            help="Exit 0 even when runs ended in an error (by default such a sweep exits 1).",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", help="US dollars one run may spend (priced by genai-prices)."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="Then gate the table against this pinned baseline ('agentkit baseline pin'): "
            "exit 1 on a regression, as 'compare --gate'.",
        ),
    ] = None,
    exclude_sim_deviations: ExcludeSimOption = False,
) -> None:
    """Run scenarios at every point of a parameter grid; print a summary, write a table.

    A run that could not finish (its model endpoint down, a crash, the turn time limit) is a
    row with ``error`` set; the summary counts them and the command exits 1 when there are
    any, after writing the table (``--allow-errors``: exit 0). Failed expectations are
    results, not errors: they never change the exit status.

    Ctrl-C stops cleanly: the table so far (finished runs, the rest not started) is written
    to --out, and --resume runs the rest.

    --baseline NAME: after the table is written, it is gated against the pinned baseline with
    the rule of 'compare --gate'; a regression exits 1."""
    with clean_errors(), exporting(), _store_for_runs(store):
        require("eval", "agentkit eval", "pandas", "yaml", "tqdm")
        from agentkit.eval import (
            SweepInterrupted,
            check_output_path,
            load_results,
            parse_grid,
            parse_sets,
            run_eval,
            save_results,
        )
        from agentkit.eval.results import report_text, run_errors

        target = check_output_path(out) if out is not None else None
        pinned = _baseline_table(ctx, baseline) if baseline is not None else None
        suites = [str(path) for path in scenarios if str(path).startswith("bfcl:")]
        tau2 = [str(path) for path in scenarios if str(path).startswith("tau2:")]
        chosen: list[Path] | list[Scenario] = scenarios
        if suites or tau2:
            loaded = _with_suites(scenarios, suites, limit, seed, agent, memory_context)
            chosen = (
                _with_tau2(loaded, tau2, split, limit, seed, agent, judge_model) if tau2 else loaded
            )
        if _first_tool_tables(scenarios) and not suites and not tau2:
            _eval_first_tool(ctx, scenarios, model, assignments or [], tags or [], target)
            return
        if resume and target is None:
            raise UsageError("--resume needs --out: the table to resume")
        previous = load_results(target) if resume and target and target.exists() else None
        try:
            frame = run_eval(
                chosen,
                model=model,
                sets=parse_sets(assignments or []),
                grid=parse_grid(axes or []),
                workers=workers,
                executor=executor,
                data_dir=data_root(ctx),
                tags=tags or [],
                keep_dir=keep,
                turn_timeout=turn_timeout,
                progress=progress,
                retries=retries,
                previous=previous,
                repeat=repeat,
                user_model=user_model,
                max_tokens=max_tokens,
                max_model_calls=max_model_calls,
                max_seconds=max_seconds,
                sweep_max_tokens=sweep_max_tokens,
                concurrency=concurrency,
                judge_model=judge_model,
                max_cost=max_cost,
            )
        except SweepInterrupted as stopped:
            _save_interrupted(stopped, target)
            raise typer.Exit(130) from None
        if suites:
            frame = _bfcl_baseline(ctx, frame, chosen, model, agent, prompt_mode, progress)
        typer.echo(report_text(frame))
        if suites:
            from agentkit.eval.bfcl.summary import bfcl_report

            typer.echo(bfcl_report(frame))
        if tau2:
            from agentkit.eval.tau2.summary import tau2_report

            typer.echo(tau2_report(frame))
        if target is not None:
            save_results(frame, target)
            typer.echo(f"wrote {target} ({len(frame)} rows, {len(frame.columns)} columns)")
        regressed = False
        if pinned is not None and baseline is not None:
            regressed = _gate_against(pinned, frame, baseline, exclude_sim_deviations)
        if (run_errors(frame) and not allow_errors) or regressed:
            raise typer.Exit(1)


def _baseline_table(ctx: typer.Context, name: str) -> pd.DataFrame:
    """The pinned baseline *name* (checked before any run)."""
    from agentkit.eval.baselines import load_baseline

    return load_baseline(name, data_root(ctx))


def _gate_against(
    pinned: pd.DataFrame, frame: pd.DataFrame, name: str, exclude_sim_deviations: bool
) -> bool:
    """Print the comparison of *frame* with the baseline and the gate's verdict; True on a
    regression."""
    from agentkit.eval.gate import gate

    judged = gate(
        pinned,
        frame,
        labels=(f"baseline {name}", "this run"),
        exclude_sim_deviations=exclude_sim_deviations,
    )
    typer.echo("")
    typer.echo(judged.comparison.report())
    typer.echo("")
    typer.echo(judged.report())
    return judged.regressed


def _with_suites(
    paths: list[Path],
    suites: list[str],
    limit: int | None,
    seed: int,
    agent: str | None,
    memory_context: str,
) -> list[Scenario]:
    """The scenarios of the BFCL *suites* and of the other *paths* (files, folders)."""
    from agentkit.eval import load_scenarios
    from agentkit.eval.bfcl.suite import DEFAULT_AGENT, load_suite

    files = [path for path in paths if not str(path).startswith(("bfcl:", "tau2:"))]
    if not suites:
        return load_scenarios(files) if files else []
    contexts = ("compressed", "whole", "none")
    if memory_context not in contexts:
        raise UsageError(
            f"--memory-context is one of {', '.join(contexts)}, not {memory_context!r}"
        )
    chosen: list[Scenario] = list(
        load_suite(
            suites,
            limit=limit,
            seed=seed,
            agent=agent or DEFAULT_AGENT,
            memory_context=memory_context,  # type: ignore[arg-type]  # checked above
        )
    )
    if files:
        chosen += load_scenarios(files)
    return chosen


def _with_tau2(
    chosen: list[Scenario],
    suites: list[str],
    split: str,
    limit: int | None,
    seed: int,
    agent: str | None,
    judge_model: str | None,
) -> list[Scenario]:
    """*chosen* and the scenarios of the tau2 *suites* (an unknown domain or split: exit 2;
    *judge_model* grades τ²'s natural-language assertions)."""
    from agentkit.eval.tau2.suite import load_suite

    judge = judge_model if judge_model != "scripted" else None
    loaded = load_suite(suites, split=split, limit=limit, seed=seed, agent=agent, judge_model=judge)
    return [*chosen, *loaded]


def _bfcl_baseline(
    ctx: typer.Context,
    frame: pd.DataFrame,
    scenarios: list[Path] | list[Scenario],
    model: str | None,
    agent: str | None,
    prompt_mode: bool,
    progress: bool,
) -> pd.DataFrame:
    """*frame* with the model-alone rows of its BFCL items, when ``--prompt-mode`` asks."""
    if not prompt_mode:
        return frame
    from agentkit.eval.bfcl.run import _agent_model, with_prompt_mode
    from agentkit.eval.bfcl.suite import DEFAULT_AGENT, BfclScenario

    bfcl = [s for s in scenarios if isinstance(s, BfclScenario)]
    spec = model or _agent_model(agent or DEFAULT_AGENT, data_root(ctx))
    return with_prompt_mode(frame, bfcl, spec, progress=progress)


@contextmanager
def _store_for_runs(store: str | None) -> Iterator[None]:
    """The runs' agents (opened in this process or in local workers, which inherit the
    environment) use the store *store* names, through ``$AGENTKIT_STORE``, for the block."""
    from agentkit.store.choice import FILES, STORE_ENV, resolve_store_spec

    chosen = resolve_store_spec(store)
    if chosen != FILES:
        require("postgres", "the PostgreSQL store", "psycopg", "psycopg_pool")
    before = os.environ.get(STORE_ENV)
    if chosen == FILES:
        os.environ.pop(STORE_ENV, None)
    else:
        os.environ[STORE_ENV] = chosen
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = before


def _first_tool_tables(paths: list[Path]) -> bool:
    from agentkit.eval.first_tool import is_first_tool_table

    return bool(paths) and all(is_first_tool_table(path) for path in paths)


def _eval_first_tool(
    ctx: typer.Context,
    paths: list[Path],
    model: str | None,
    assignments: list[str],
    splits: list[str],
    target: Path | None,
) -> None:
    """First-tool tables (``kind: first_tool``): each request's first action, then per table
    and split the accuracy, "no tool" precision, side-effect false positives and latency;
    ``--tag dev`` / ``--tag heldout`` runs one split."""
    import pandas as pd

    from agentkit.eval import parse_sets, save_results
    from agentkit.eval.first_tool import (
        first_tool_report,
        first_tool_summary,
        load_first_tool_tables,
        run_first_tool,
    )

    tables = load_first_tool_tables(paths)
    rows = run_first_tool(
        tables,
        data_dir=data_root(ctx),
        model=model,
        params=parse_sets(assignments),
        splits=tuple(splits) or ("dev", "heldout"),
    )
    typer.echo(first_tool_report(first_tool_summary(rows)))
    if target is not None:
        save_results(pd.DataFrame(rows), target)
        typer.echo(f"wrote {target} ({len(rows)} rows)")


def _save_interrupted(stopped: SweepInterrupted, target: Path | None) -> None:
    """Ctrl-C: the table so far to *target*, so that ``--resume`` runs the rest."""
    from agentkit.eval import save_results

    saved = ""
    if target is not None and stopped.results is not None:
        save_results(stopped.results, target)
        saved = f"; wrote {target}, --resume runs the rest"
    typer.echo(
        f"agentkit: stopped after {stopped.finished} of {len(stopped.rows)} runs{saved}", err=True
    )


@app.command("compare")
def compare_command(
    a: Annotated[Path, typer.Argument(help="Results table A (.parquet or .csv), the baseline.")],
    b: Annotated[
        Path | None,
        typer.Argument(help="Results table B (.parquet or .csv), the variant (or --points)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the comparison: .json (everything) or .parquet/.csv (the pairs)."
        ),
    ] = None,
    on: Annotated[
        list[str] | None,
        typer.Option("--on", help="Pair on this column (repeatable; default: chosen for you)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="The bootstrap's seed.")] = None,
    gate: Annotated[
        bool,
        typer.Option(
            "--gate",
            help="Exit 1 when B regressed against A (McNemar p < 0.05 with more pairs passing "
            "on A only, a bootstrap interval below 0, or a scenario passing every repeat on A "
            "and failing every repeat on B), printing each regression; else 0.",
        ),
    ] = False,
    exclude_sim_deviations: ExcludeSimOption = False,
    points: ComparePoints = None,
) -> None:
    """Pair the runs of two results tables and compare them: pass rates with Wilson intervals,
    the paired difference with a bootstrap interval, McNemar's exact test, the runs that
    flipped, token/call/latency/cost deltas, pass^k under repeats, and the rows without a
    partner; with --gate, the regression verdict and its exit status."""
    with clean_errors():
        require("eval", "agentkit compare", "pandas")
        import json

        from agentkit.eval import compare, save_results
        from agentkit.eval.gate import verdict
        from agentkit.eval.stats import DEFAULT_SEED

        if out is not None and out.suffix not in (".json", ".parquet", ".csv"):
            raise UsageError(f"--out takes a .json, .parquet or .csv file, not {out.name!r}")
        heavy = ("transcript", "judgements")  # not compared: most of a table's bytes
        first, second, labels = _tables_to_compare(a, b, points, without=heavy)
        result = compare(
            first,
            second,
            on=on or None,
            labels=labels,
            seed=DEFAULT_SEED if seed is None else seed,
            exclude_sim_deviations=exclude_sim_deviations,
        )
        typer.echo(result.report())
        judged = verdict(result) if gate else None
        if judged is not None:
            typer.echo("")
            typer.echo(judged.report())
        if out is not None:
            if out.suffix == ".json":
                out.parent.mkdir(parents=True, exist_ok=True)
                value = result.to_json()
                if judged is not None:
                    value["gate"] = judged.to_json()
                text = json.dumps(value, ensure_ascii=False, indent=2)
                out.write_text(text + "\n", encoding="utf-8")
            else:
                save_results(result.pairs, out)
            typer.echo(f"wrote {out}")
    if judged is not None and judged.regressed:
        raise typer.Exit(1)
