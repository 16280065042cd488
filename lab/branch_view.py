"""``BranchView``: a conversation and its forks as a tree; fork, replay, compare side by side.

A thin view over the branches API: the tree is read from ``forkedFrom`` in the agent's
conversations (:meth:`Agent.list_conversations`), each branch's turns from its checkpoints
(:func:`agentkit.replays.turn_facts`), the buttons call :meth:`Agent.fork` and
:func:`agentkit.replay`, and the comparison is :func:`agentkit.replays.compare_turns` from the
first turn where two branches part. The plain functions here (``branch_tree``, ``tree_frame``,
``comparison_frame``, …) hold all the rendering logic and need no kernel.

"Keep turns" is the fork point for both buttons: **Fork** makes a branch holding turns 1…N and
their memory; **Replay the rest** forks there and re-sends the user's messages of turns N+1…
under the Model / Config / prompt fields (see :func:`agentkit.replay`). It starts at the turn
before the last, so the primary button replays something as the view opens (the last turn).
The tables wrap their long cells and scroll sideways within the view, never past its edge.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit import Agent, AgentkitError, ChatModel, ConversationMeta, UsageError, replay
from agentkit.ids import check_id
from agentkit.models import parse_model_spec
from agentkit.planning.prompts import PROMPT_NAMES, load_prompt
from agentkit.planning.replay import check_template
from agentkit.replays import compare_turns, turn_facts
from agentkit.store import ConversationKey

from lab._html import frame_html, notice_html

__all__ = [
    "TREE_COLUMNS",
    "BranchNode",
    "BranchView",
    "branch_tree",
    "comparison_frame",
    "config_sets",
    "shared_turns",
    "tree_frame",
    "turn_options",
]

Facts = Sequence[Mapping[str, Any]]

TREE_COLUMNS = (
    "branch",
    "conversationId",
    "forkedAtTurn",
    "turns",
    "newTurns",
    "modelCalls",
    "tokens",
    "latencyMs",
    "lastAnswer",
)


@dataclass(frozen=True)
class BranchNode:
    """One conversation of a branch tree, in depth-first order."""

    conversation_id: str
    title: str
    depth: int
    parent: str | None = None  # the conversation it was forked from (None: the tree's root)
    forked_at: str | None = None  # the parent's turn it was forked at (None: before the first)


def branch_tree(metas: Sequence[ConversationMeta], conversation_id: str) -> list[BranchNode]:
    """The tree holding *conversation_id*: its root (followed up ``forkedFrom``) and every
    fork below it, depth first, oldest sibling first. A fork whose source is gone starts a
    tree of its own."""
    by_id = {meta.conversation_id: meta for meta in metas}
    if conversation_id not in by_id:
        return []
    root, seen = conversation_id, {conversation_id}
    while (origin := by_id[root].forked_from) is not None and origin.conversation_id in by_id:
        if origin.conversation_id in seen:
            break
        root = origin.conversation_id
        seen.add(root)
    children: dict[str, list[ConversationMeta]] = {}
    for meta in sorted(metas, key=lambda m: (m.created_at, m.conversation_id)):
        if meta.forked_from is not None and meta.conversation_id != root:
            children.setdefault(meta.forked_from.conversation_id, []).append(meta)
    nodes: list[BranchNode] = []

    def visit(meta: ConversationMeta, depth: int) -> None:
        origin = meta.forked_from if depth else None
        nodes.append(
            BranchNode(
                meta.conversation_id,
                meta.title,
                depth,
                origin.conversation_id if origin else None,
                origin.message_id if origin else None,
            )
        )
        for child in children.get(meta.conversation_id, []):
            if all(node.conversation_id != child.conversation_id for node in nodes):
                visit(child, depth + 1)

    visit(by_id[root], 0)
    return nodes


def shared_turns(first: Facts, second: Facts) -> int:
    """How many leading turns two branches share (a fork keeps its source's message ids)."""
    count = 0
    for a, b in zip(first, second, strict=False):
        if a["message_id"] != b["message_id"]:
            break
        count += 1
    return count


def _turn_number(facts: Facts, message_id: str | None) -> int:
    """The 1-based number of turn *message_id* in *facts* (0: before the first turn)."""
    ids = [turn["message_id"] for turn in facts]
    return ids.index(message_id) + 1 if message_id in ids else 0


def tree_frame(nodes: Sequence[BranchNode], facts: Mapping[str, Facts]) -> pd.DataFrame:
    """One row per branch: its place in the tree, its turns, and what its own turns (those
    after its fork point) cost: model calls, tokens, latency; and its last answer."""
    rows: list[dict[str, Any]] = []
    for node in nodes:
        turns = facts.get(node.conversation_id, [])
        forked = _turn_number(facts.get(node.parent, []), node.forked_at) if node.parent else None
        own = turns[forked or 0 :]
        rows.append(
            {
                "branch": _indent(node.depth) + node.title,
                "conversationId": node.conversation_id,
                "forkedAtTurn": "" if forked is None else forked,
                "turns": len(turns),
                "newTurns": len(own),
                "modelCalls": sum(int(turn["model_calls"]) for turn in own),
                "tokens": sum(int(turn["tokens"]) for turn in own),
                "latencyMs": round(sum(float(turn["latency_ms"]) for turn in own), 1),
                "lastAnswer": str(turns[-1]["answer"]) if turns else "",
            }
        )
    return pd.DataFrame(rows, columns=list(TREE_COLUMNS))


def _indent(depth: int) -> str:
    """The tree drawn in the title column (no-break spaces survive HTML)."""
    return "\u00a0\u00a0\u00a0" * (depth - 1) + "└─ " if depth else ""


def comparison_frame(base: Facts, other: Facts) -> pd.DataFrame:
    """Two branches side by side from the first turn where they part (the turns both hold are
    left out): :func:`agentkit.replays.compare_turns`, with ``turn`` numbered in the
    conversation (``base`` is the ``original_*`` side)."""
    start = shared_turns(base, other)
    table = compare_turns(base[start:], other[start:])
    if not table.empty:
        table["turn"] = table["turn"] + start
    return table


def turn_options(facts: Facts, *, width: int = 48) -> list[tuple[str, int]]:
    """The "Keep turns" choices: 0 (none) to every turn, labelled with the user's message."""
    options = [("0 · none (from the start)", 0)]
    for number, turn in enumerate(facts, start=1):
        text = " ".join(str(turn["user"]).split())
        options.append((f"{number} · {text[:width]}{'…' if len(text) > width else ''}", number))
    return options


def config_sets(text: str) -> list[str]:
    """The Config field: one ``dotted.key=value`` per line (blank lines and ``#`` comments
    skipped); :func:`agentkit.replay` parses and checks them."""
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class BranchView(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """The branch tree of *conversation_id* (an *agent*'s conversation, or one of its forks).

    *model* (a spec or a ChatModel) fills the Model field; the replay gets the object itself
    while the field shows its spec (and :func:`agentkit.replay` closes it when done). An empty
    field replays with the model of the agent's config.json (after the Config keys).
    """

    def __init__(
        self, agent: Agent, conversation_id: str, *, model: str | ChatModel | None = None
    ) -> None:
        self.agent = agent
        self.conversation_id = check_id(conversation_id, "conversation")
        agent.store.meta(ConversationKey(agent.id, conversation_id))  # unknown: a clear error
        self._given_model = model if isinstance(model, ChatModel) else None
        self._template = ""
        self._syncing = False
        self.nodes: list[BranchNode] = []
        self.facts: dict[str, list[dict[str, Any]]] = {}
        self.tree = pd.DataFrame(columns=list(TREE_COLUMNS))
        self.comparison = pd.DataFrame()
        self.last_replay: pd.DataFrame | None = None

        wide = {"description_width": "initial"}
        self.tree_table = widgets.HTML()
        self.branch_choice = widgets.Dropdown(
            description="Branch", layout={"width": "48%"}, style=wide
        )
        self.against_choice = widgets.Dropdown(
            description="Compare with", layout={"width": "48%"}, style=wide
        )
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.turn_choice = widgets.Dropdown(
            description="Keep turns", layout={"width": "60%"}, style=wide
        )
        self.fork_title = widgets.Text(description="Title", placeholder="(… fork) / (… replay)")
        spec = model.spec if isinstance(model, ChatModel) else (model or "")
        self.model = widgets.Text(
            value=spec, description="Model", placeholder="config.json's model", style=wide
        )
        self.sets = widgets.Textarea(
            description="Config",
            placeholder="planner.strategy=next_step (one key=value a line)",
            layout={"width": "60%", "height": "60px"},
            style=wide,
        )
        self.template_name = widgets.Dropdown(
            options=list(PROMPT_NAMES), value="plan", description="Prompt", style=wide
        )
        self.editor = widgets.Textarea(layout={"width": "100%", "height": "180px"})
        self.fork_button = widgets.Button(description="Fork", icon="code-fork")
        self.replay_button = widgets.Button(description="Replay the rest", button_style="primary")
        self.notice = widgets.HTML()
        self.comparison_table = widgets.HTML()
        self.tree_table.add_class("agentkit-branch-tree")
        self.comparison_table.add_class("agentkit-branch-comparison")
        for table in (self.tree_table, self.comparison_table):
            table.layout = widgets.Layout(width="100%", overflow="auto")
        self.notice.add_class("agentkit-lab-status")

        self.branch_choice.observe(self._on_branch, names="value")
        self.against_choice.observe(self._on_against, names="value")
        self.template_name.observe(lambda _: self._load_template(), names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.fork_button.on_click(self._on_fork)
        self.replay_button.on_click(self._on_replay)

        super().__init__(
            [
                widgets.HTML(f"<b>Branches</b> of {escape(agent.id)}"),
                self.tree_table,
                widgets.HBox([self.branch_choice, self.against_choice, self.refresh_button]),
                self.comparison_table,
                widgets.HTML("<b>From this branch</b>"),
                widgets.HBox([self.turn_choice, self.fork_title]),
                self.model,
                self.sets,
                self.template_name,
                self.editor,
                widgets.HBox([self.fork_button, self.replay_button]),
                self.notice,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("agentkit-branch-view")
        self._load_template()
        self.refresh()

    # -- reading --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the tree and every branch's turns again, keeping the choices that still exist."""
        self.nodes = branch_tree(self.agent.list_conversations(), self.conversation_id)
        self.facts = {
            node.conversation_id: turn_facts(
                self.agent.store, ConversationKey(self.agent.id, node.conversation_id)
            )
            for node in self.nodes
        }
        self.tree = tree_frame(self.nodes, self.facts)
        self.tree_table.value = frame_html(self.tree, empty="No such conversation.")
        options = [(self._label(node), node.conversation_id) for node in self.nodes]
        ids = [node.conversation_id for node in self.nodes]
        current = self.branch_choice.value
        with self._quiet():
            self.branch_choice.options = options
            self.against_choice.options = options
            fallback = self.conversation_id if self.conversation_id in ids else None
            self.branch_choice.value = current if current in ids else fallback
        self._show_branch(keep_against=True)

    def select(self, conversation_id: str, against: str | None = None) -> None:
        """Show branch *conversation_id* compared with *against* (default: its source)."""
        with self._quiet():
            self.branch_choice.value = conversation_id
        self._show_branch(against=against)

    def node(self, conversation_id: str) -> BranchNode:
        return next(node for node in self.nodes if node.conversation_id == conversation_id)

    def _label(self, node: BranchNode) -> str:
        return f"{'· ' * node.depth}{node.title} · {node.conversation_id}"

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        """Change the dropdowns from code without their observers redrawing half-way."""
        self._syncing = True
        try:
            yield
        finally:
            self._syncing = False

    def _on_branch(self, _: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_branch()

    def _on_against(self, _: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_comparison()

    def _default_against(self, branch: str) -> str | None:
        node = self.node(branch)
        if node.parent is not None:
            return node.parent
        children = [n.conversation_id for n in self.nodes if n.parent == branch]
        return children[-1] if children else None

    def _show_branch(self, *, against: str | None = None, keep_against: bool = False) -> None:
        branch = self.branch_choice.value
        if branch is None:  # the conversation was deleted meanwhile
            self.turn_choice.options = []
            self._show_comparison()
            return
        ids = [node.conversation_id for node in self.nodes]
        current = self.against_choice.value
        if against is None:
            keep = keep_against and current in ids and current != branch
            against = current if keep else self._default_against(branch)
        facts = self.facts.get(branch, [])
        with self._quiet():
            self.against_choice.value = against
            self.turn_choice.options = turn_options(facts)
            self.turn_choice.value = max(len(facts) - 1, 0)  # the last turn is replayed
        self._show_comparison()

    def _show_comparison(self) -> None:
        branch, against = self.branch_choice.value, self.against_choice.value
        if branch is None or against is None or branch == against:
            self.comparison = pd.DataFrame()
            empty = "A single branch: fork or replay to compare."
        else:
            # the older side is ``original_*``: the compared-with one unless it descends from it
            base, other = against, branch
            if self._is_ancestor(branch, against):
                base, other = branch, against
            self.comparison = comparison_frame(self.facts[base], self.facts[other])
            empty = "The two branches hold the same turns."
        self.comparison_table.value = frame_html(self.comparison, empty=empty)

    def _is_ancestor(self, ancestor: str, conversation_id: str) -> bool:
        parent = self.node(conversation_id).parent
        while parent is not None:
            if parent == ancestor:
                return True
            parent = self.node(parent).parent
        return False

    def _load_template(self) -> None:
        self._template = load_prompt(self.template_name.value, self.agent.folder.path).template
        self.editor.value = self._template

    # -- actions --------------------------------------------------------------------------

    def _kept_turns(self) -> tuple[str, list[dict[str, Any]], int]:
        branch = self.branch_choice.value
        if branch is None:
            raise UsageError("no branch is selected")
        return branch, self.facts.get(branch, []), int(self.turn_choice.value or 0)

    def fork(self) -> ConversationMeta:
        """Fork the selected branch after its "Keep turns" turn; shows the fork."""
        branch, facts, kept = self._kept_turns()
        if kept == 0:
            raise UsageError("a fork keeps at least one turn (replay from the start instead)")
        title = self.fork_title.value.strip() or None
        meta = self.agent.fork(branch, at=str(facts[kept - 1]["message_id"]), title=title)
        self.refresh()
        self.select(meta.conversation_id, against=branch)
        self.notice.value = notice_html(f"forked {meta.conversation_id} at turn {kept}", "ok")
        return meta

    def replay_model(self) -> str | ChatModel | None:
        """What the replay runs on: the given model while the field shows its spec, else the
        field's spec (checked here, before anything is forked), else None (config.json's)."""
        spec = self.model.value.strip()
        if self._given_model is not None and spec == self._given_model.spec:
            return self._given_model
        if spec:
            parse_model_spec(spec)
        return spec or None

    def replay(self) -> pd.DataFrame:
        """Replay the selected branch's turns after "Keep turns" under the Model, Config and
        prompt fields; shows the new branch beside its source and returns the table."""
        branch, facts, kept = self._kept_turns()
        if kept >= len(facts):
            raise UsageError(f"nothing to replay after turn {kept}: keep fewer turns")
        name, text = self.template_name.value, self.editor.value
        with tempfile.TemporaryDirectory(prefix="agentkit-branch-") as scratch:
            prompts: dict[str, str | Path] = {}
            if text != self._template:
                check_template(name, text)
                prompts[name] = Path(scratch) / f"{name}.md"
                Path(prompts[name]).write_text(text, encoding="utf-8")
            table = replay(
                self.agent,
                branch,
                from_message=str(facts[kept]["message_id"]),
                model=self.replay_model(),
                sets=config_sets(self.sets.value),
                prompts=prompts,
                title=self.fork_title.value.strip() or None,
            )
        self.last_replay = table
        self.refresh()
        self.select(str(table.attrs["branch"]), against=branch)
        changed = int((~table["same_answer"]).sum())
        self.notice.value = notice_html(
            f"replayed {len(table)} turns as {table.attrs['branch']}; {changed} answers differ",
            "ok",
        )
        return table

    def _run(self, button: widgets.Button, doing: str, action: Callable[[], object]) -> None:
        button.disabled = True
        self.notice.value = notice_html(f"{doing}…")
        try:
            action()
        except AgentkitError as error:
            with suppress(AgentkitError):
                self.refresh()  # whatever a failed replay left (a branch cut short) is shown
            self.notice.value = notice_html(str(error), "error")
        finally:
            button.disabled = False

    def _on_fork(self, button: widgets.Button) -> None:
        self._run(button, "forking", self.fork)

    def _on_replay(self, button: widgets.Button) -> None:
        self._run(button, "replaying", self.replay)
