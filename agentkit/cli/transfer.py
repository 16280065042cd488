"""``agentkit export`` and ``agentkit import``: conversations and memory between stores.

See :mod:`agentkit.store.transfer`: an export is the file store's exact layout (plus
``agentkit.db``), so it can be read by ``agentkit --data-dir DIR …`` as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit.cli._app import StoreOption, app, clean_errors, data_root
from agentkit.errors import UsageError

if TYPE_CHECKING:  # imported by the commands themselves: `agentkit agents` stays fast
    from agentkit.store import ConfigStore, ConversationStore

__all__ = ["export_command", "import_command"]


@contextmanager
def _stores(spec: str | None, root: Path) -> Iterator[tuple[ConversationStore, ConfigStore]]:
    from agentkit.layout import CONFIG_DB
    from agentkit.store import SqliteConfigStore
    from agentkit.store.choice import open_stores

    opened = open_stores(spec, root)
    local = None
    if opened.config is None:  # the file store: system_config in agentkit.db under the root
        local = SqliteConfigStore(root / CONFIG_DB)
    config: ConfigStore = opened.config if local is None else local  # type: ignore[assignment]
    try:
        yield opened.conversations, config
    finally:
        if local is not None:
            local.close()
        opened.close()


def _agents(root: Path, given: list[str] | None) -> list[str]:
    from agentkit.agent_folder import AgentFolder, list_agent_ids

    if given:
        for agent in given:
            AgentFolder.load(root, agent)  # an unknown agent is an error, not "0 moved"
        return given
    return list_agent_ids(root)


@app.command("export")
def export_command(
    ctx: typer.Context,
    to: Annotated[Path, typer.Option("--to", help="The directory to write (the file layout).")],
    agents: Annotated[
        list[str] | None, typer.Argument(help="Only these agents (default: every agent).")
    ] = None,
    store_spec: StoreOption = None,
) -> None:
    """Write conversations and memory from the store to DIR in the file store's layout."""
    with clean_errors():
        from agentkit.store.transfer import export_to

        root = data_root(ctx)
        chosen = _agents(root, agents)
        if to.exists() and any(to.iterdir()):
            raise UsageError(f"{to} is not empty: export into a new directory")
        with _stores(store_spec, root) as (conversations, config):
            moved = export_to(conversations, config, to, chosen)
        typer.echo(
            f"exported {moved.conversations} conversations and {moved.entries} memory entries "
            f"of {len(moved.agents)} agents to {to}"
        )


@app.command("import")
def import_command(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="An export (the file store's layout).")],
    agents: Annotated[
        list[str] | None, typer.Argument(help="Only these agents (default: all it holds).")
    ] = None,
    store_spec: StoreOption = None,
) -> None:
    """Load an export into the store (refused if the store has any of its conversations)."""
    with clean_errors():
        from agentkit.store.transfer import import_from

        root = data_root(ctx)
        if directory.resolve() == root.resolve():
            raise UsageError("import from a directory that is not the data root itself")
        with _stores(store_spec, root) as (conversations, config):
            moved = import_from(directory, conversations, config, agents or None)
        typer.echo(
            f"imported {moved.conversations} conversations and {moved.entries} memory entries "
            f"of {len(moved.agents)} agents from {directory}"
        )
