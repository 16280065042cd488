"""``CompressionLab``: sweep the compression strategy and thresholds N / T / K and see what
survives.

A thin view: the sweep is :func:`agentkit.memory.sweep.sweep_compression`, the parsing and the
rendering are the plain functions of :mod:`lab.sweep_view` and, for the strategies, of this
module (:func:`parse_strategies`, :func:`strategy_frame`, :func:`strategy_figure`: facts kept,
lost and ungrounded per strategy, and the time per summary). The lab never writes anything: it
reads a scenario file or a stored conversation and shows what compression *would* do.
Sweeps run on a private background event loop, so the lab works inside Jupyter's own loop and
a model's state stays on one loop across sweeps.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit import Agent, ChatModel, create_model
from agentkit.agent_folder import resolve_data_dir
from agentkit.errors import AgentkitError, ConversationNotFoundError, UsageError
from agentkit.loop import BackgroundLoop
from agentkit.memory.strategies import STRATEGIES
from agentkit.memory.sweep import SweepRow, ThresholdGrid, sweep_compression
from matplotlib.figure import Figure

from lab.sweep_view import (
    SweepSource,
    conversation_source,
    figure_png,
    parse_facts,
    parse_grid,
    scenario_files,
    scenario_source,
    sweep_figure,
    sweep_frame,
)

__all__ = [
    "DEFAULT_GRID",
    "CompressionLab",
    "parse_strategies",
    "strategy_figure",
    "strategy_frame",
]

#: small enough for the embedded model: at most two summaries per source (two K values)
DEFAULT_GRID = ThresholdGrid(max_messages=(4, 12), token_threshold=(100, 600), keep_recent=(2, 6))


def _values_text(values: Sequence[object]) -> str:
    return ", ".join(str(value) for value in values)


def parse_strategies(text: str) -> tuple[str, ...]:
    """The strategies typed in the lab (``model, extractive``); an unknown one is an error
    naming it and the known ones."""
    names = tuple(item for item in re.split(r"[\s,;]+", text.strip()) if item)
    if not names:
        raise UsageError("the grid's strategy has no values: give at least one")
    for name in names:
        if name not in STRATEGIES:
            raise UsageError(f"strategy {name!r} is not one of {', '.join(STRATEGIES)}")
    return names


def strategy_frame(rows: Sequence[SweepRow]) -> pd.DataFrame:
    """Per strategy (compressed points only): facts kept / lost / ungrounded (means), tokens
    after, and the median time per summary (summaries made, not reused)."""
    done = [row for row in rows if row.status == "compressed"]
    records = []
    for name in dict.fromkeys(row.strategy for row in done):
        mine = [row for row in done if row.strategy == name]
        made = sorted(row.summary_ms for row in mine if not row.reused)
        records.append({
            "strategy": name,
            "points": len(mine),
            "facts_total": max(row.facts_total for row in mine),
            "facts_kept": sum(row.facts_in_state for row in mine) / len(mine),
            "facts_lost": sum(row.facts_total - row.facts_in_state for row in mine) / len(mine),
            "facts_ungrounded": sum(row.facts_ungrounded for row in mine) / len(mine),
            "tokens_after": sum(row.tokens_after for row in mine) / len(mine),
            "summary_ms": made[len(made) // 2] if made else None,
        })  # fmt: skip
    return pd.DataFrame(records)


def strategy_figure(rows: Sequence[SweepRow], title: str = "") -> Figure:
    """Facts kept, lost and ungrounded per strategy (stacked bars, compressed points
    averaged) and the median time per summary (right)."""
    frame = strategy_frame(rows)
    figure = Figure(figsize=(8.0, 3.6), layout="constrained")
    facts_axes, time_axes = figure.subplots(1, 2, width_ratios=(2, 1))
    names = list(frame["strategy"]) if not frame.empty else []
    positions = list(range(len(names)))
    if names:
        kept, lost = list(frame["facts_kept"]), list(frame["facts_lost"])
        ungrounded = list(frame["facts_ungrounded"])
        facts_axes.bar(positions, kept, label="kept in TaskState", color="#2e7d32")
        facts_axes.bar(positions, lost, bottom=kept, label="lost", color="#c62828")
        above = [k + x for k, x in zip(kept, lost, strict=True)]
        facts_axes.bar(
            positions, ungrounded, bottom=above, label="ungrounded (dropped)", color="#f9a825"
        )
        times = [0.0 if pd.isna(v) else float(v) for v in frame["summary_ms"]]
        time_axes.bar(positions, times, color="#1565c0")
        facts_axes.legend(loc="upper right", fontsize="small")
    facts_axes.set_xticks(positions, names)
    facts_axes.set_ylabel("facts (mean over compressed points)")
    facts_axes.set_title(title or "what each strategy keeps")
    time_axes.set_xticks(positions, names)
    time_axes.set_ylabel("ms per summary (median)")
    time_axes.set_title("time per summary")
    return figure


class CompressionLab:
    """Pick a scenario file or a conversation, a model and a grid; run; read the table/plot.

    *agent* (with *conversation_id* preselected) enables the conversation source; scenario
    files are listed from *scenarios_dir* (default ``{data root}/scenarios/compression``) and
    *scenario*. *model* is a spec (``llama``, ``scripted:FILE``…) or a ChatModel; by default
    the agent's model, else ``llama``. The Model field shows its spec; typing another spec
    switches models (a relative ``scripted:FILE`` resolves against
    the agent's folder, else the working directory). After a run, :attr:`rows` and :attr:`frame`
    hold the results.
    """

    def __init__(
        self,
        agent: Agent | None = None,
        conversation_id: str | None = None,
        *,
        scenario: Path | str | None = None,
        scenarios_dir: Path | str | None = None,
        facts: Sequence[str] = (),
        model: str | ChatModel | None = None,
        grid: ThresholdGrid | None = None,
    ) -> None:
        self.agent = agent
        self.rows: list[SweepRow] = []
        self.frame = pd.DataFrame()
        if model is None and agent is not None and isinstance(agent.model, ChatModel):
            model = agent.model
        self._given_model = model if isinstance(model, ChatModel) else None
        self._models: dict[str, ChatModel] = {}
        self._loop: BackgroundLoop | None = None
        grid = grid or DEFAULT_GRID
        folder = scenarios_dir
        if folder is None:
            folder = resolve_data_dir() / "scenarios" / "compression"
        files = scenario_files(folder)
        if scenario is not None and Path(scenario) not in files:
            files.insert(0, Path(scenario))
        spec = model.spec if isinstance(model, ChatModel) else (model or "llama")

        self.source_kind = widgets.ToggleButtons(
            options=[("scenario file", "scenario"), ("conversation", "conversation")],
            value="conversation" if conversation_id else "scenario",
            description="Source",
        )
        self.scenario = widgets.Dropdown(
            options=[(path.name, str(path)) for path in files],
            value=str(scenario) if scenario is not None else (str(files[0]) if files else None),
            description="Scenario",
        )
        conversations = (
            [
                (f"{c.title} · {c.conversation_id}", c.conversation_id)
                for c in agent.list_conversations()
            ]
            if agent is not None
            else []
        )
        if conversation_id is not None and conversation_id not in {cid for _, cid in conversations}:
            if agent is None:
                raise UsageError("a conversation_id needs the agent it belongs to")
            raise ConversationNotFoundError(agent.id, conversation_id)
        self.conversation = widgets.Dropdown(
            options=conversations, value=conversation_id, description="Conversation"
        )
        if agent is None:
            self.source_kind.disabled = True
        self.facts = widgets.Textarea(
            value="\n".join(facts),
            description="Facts",
            placeholder="one known fact per line",
            layout=widgets.Layout(width="60%", height="110px"),
        )
        self.model = widgets.Text(value=spec, description="Model")
        self.n_values = widgets.Text(_values_text(grid.max_messages), description="N values")
        self.t_values = widgets.Text(_values_text(grid.token_threshold), description="T values")
        self.k_values = widgets.Text(_values_text(grid.keep_recent), description="K values")
        self.strategies = widgets.Text(_values_text(grid.strategy), description="Strategies")
        self.run_button = widgets.Button(description="Run sweep", button_style="primary")
        self.progress = widgets.IntProgress(value=0, min=0, max=grid.size, description="Sweep")
        self.status = widgets.HTML()
        self.plot = widgets.Image(format="png")
        self.strategy_plot = widgets.Image(format="png")
        self.table = widgets.HTML()
        self.run_button.on_click(self._on_run)
        self.scenario.observe(self._on_scenario, names="value")
        self.source_kind.observe(self._on_source, names="value")
        if not facts and self.source_kind.value == "scenario":
            self._fill_facts()
        self.widget = widgets.VBox([
            widgets.HTML("<b>Compression lab</b>: sweep N / T / K over one dialogue"),
            self.source_kind,
            self.scenario,
            self.conversation,
            self.facts,
            self.model,
            widgets.HBox([self.n_values, self.t_values, self.k_values]),
            self.strategies,
            widgets.HBox([self.run_button, self.progress]),
            self.status,
            self.plot,
            self.strategy_plot,
            self.table,
        ])  # fmt: skip
        self.widget.add_class("agentkit-compression-lab")
        self.status.add_class("agentkit-lab-status")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:  # noqa: ANN401 - IPython's protocol
        return self.widget._repr_mimebundle_(**kwargs)

    # -- inputs ---------------------------------------------------------------------------

    def source(self) -> SweepSource:
        """The selected scenario or conversation (facts from the Facts field)."""
        facts = parse_facts(self.facts.value)
        if self.source_kind.value == "conversation":
            if self.agent is None or not self.conversation.value:
                raise UsageError("pick a conversation first")
            return conversation_source(self.agent, self.conversation.value, facts)
        if not self.scenario.value:
            raise UsageError("no scenario file: give scenario= or scenarios_dir=")
        found = scenario_source(self.scenario.value)
        return SweepSource(found.label, found.window, found.task_state, facts)

    def grid(self) -> ThresholdGrid:
        """The grid the fields hold: N, T, K and the strategies (``model, extractive,
        hybrid``)."""
        thresholds = parse_grid(self.n_values.value, self.t_values.value, self.k_values.value)
        return ThresholdGrid(
            thresholds.max_messages,
            thresholds.token_threshold,
            thresholds.keep_recent,
            parse_strategies(self.strategies.value),
        )

    def chat_model(self) -> ChatModel:
        """The model given, else the one the Model field names (created once per spec)."""
        spec = self.model.value.strip()
        if self._given_model is not None and spec == self._given_model.spec:
            return self._given_model
        if spec not in self._models:
            base = self.agent.folder.path if self.agent is not None else Path.cwd()
            created = create_model(spec, base_dir=base)
            if not isinstance(created, ChatModel):
                raise UsageError(f"compression needs a chat model; {spec!r} is a session backend")
            self._models[spec] = created
        return self._models[spec]

    # -- running --------------------------------------------------------------------------

    def run(self) -> pd.DataFrame:
        """Run the sweep with what the widgets hold; fills the table, the plot and :attr:`frame`.

        Raises the input's error (a ConfigError naming the field of a bad scenario, a
        UsageError for an empty grid…); :meth:`_on_run` shows it instead."""
        source = self.source()
        grid = self.grid()
        model = self.chat_model()
        self.progress.max, self.progress.value = grid.size, 0
        if self._loop is None:
            self._loop = BackgroundLoop()
        self.rows = self._loop.run(
            sweep_compression(
                source.window,
                source.task_state,
                model,
                grid,
                facts=source.facts,
                progress=self._advance,
            )
        )
        self.frame = sweep_frame(self.rows)
        self.plot.value = figure_png(sweep_figure(self.rows, source.label))
        self.strategy_plot.value = figure_png(strategy_figure(self.rows, source.label))
        self.table.value = self.frame.to_html(index=False, na_rep="")
        failed = sum(row.status == "failed" for row in self.rows)
        summaries = sum(
            row.status in ("compressed", "failed") and not row.reused for row in self.rows
        )
        self.status.value = html.escape(
            f"{source.label}: {len(self.rows)} grid points, {summaries} summarize calls"
            + (f", {failed} failed" if failed else "")
        )
        return self.frame

    def _advance(self, done: int, total: int) -> None:
        self.progress.max, self.progress.value = total, done

    def _show_error(self, error: Exception) -> None:
        self.status.value = f'<span style="color:#b00020">{html.escape(str(error))}</span>'

    def _on_run(self, _: widgets.Button) -> None:
        self.run_button.disabled = True
        try:
            self.run()
        except AgentkitError as error:
            self._show_error(error)
        finally:
            self.run_button.disabled = False

    def _fill_facts(self) -> None:
        if not self.scenario.value:
            return
        try:
            self.facts.value = "\n".join(scenario_source(self.scenario.value).facts)
            self.status.value = ""
        except AgentkitError as error:
            self._show_error(error)

    def _on_scenario(self, _: dict[str, Any]) -> None:
        if self.source_kind.value == "scenario":
            self._fill_facts()

    def _on_source(self, change: dict[str, Any]) -> None:
        if change["new"] == "scenario":
            self._fill_facts()

    def close(self) -> None:
        """Release the models the lab created and its event loop."""
        if self._loop is not None:
            for model in self._models.values():
                self._loop.run(model.aclose())
            self._loop.close()
            self._loop = None
        self._models.clear()
