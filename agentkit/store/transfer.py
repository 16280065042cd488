"""Moving conversations and memory between stores: ``agentkit export`` and ``agentkit import``.

An export is the file store's own layout under a directory (the seed's files, byte for byte
what the file store writes: ``journal.log``, ``meta.json``, ``history.json``, each turn's
``messages.log`` and ``calls.jsonl``) plus ``system_config`` in ``agentkit.db``; an import
loads such a directory into any store. Both copy records, never re-derive them: a
conversation's journal (:meth:`ConversationStore.journal`) goes over whole, with its
sequence numbers, timestamps, checkpoints and typed records, and each ``system_config`` entry
with its version (:meth:`ConfigStore.restore`), so the CAS versions the checkpoints name stay
true. So file → PostgreSQL → file gives the same files (``agentkit.db`` the same rows; SQLite
pages are its own business).

A conversation that exists in the target is refused before anything is written (no merge):
import into an empty store, or delete first. Agent folders (config, prompts, tools) are not
moved: they stay on disk, shared by every replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentkit.errors import UsageError
from agentkit.ids import check_id
from agentkit.layout import CONFIG_DB, DataLayout
from agentkit.store._records import JournalRecord, fold
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.files import FileConversationStore
from agentkit.store.kv import ConfigStore
from agentkit.store.sqlite_kv import SqliteConfigStore
from agentkit.store.values import ConversationKey

__all__ = ["Moved", "copy_data", "export_to", "import_from", "stored_agents"]


@dataclass(frozen=True)
class Moved:
    """What a copy moved."""

    conversations: int
    entries: int
    agents: tuple[str, ...]


def stored_agents(root: Path) -> list[str]:
    """The agents with a conversations folder under the data root *root* (an export's)."""
    agents = DataLayout(root).agents_dir
    if not agents.is_dir():
        return []
    return sorted(
        path.name
        for path in agents.iterdir()
        if (path / "conversations").is_dir() and check_id(path.name, "agent")
    )


def _entry_agent(key: str) -> str | None:
    """The agent a ``system_config`` key belongs to (``kind:agent:conversation``)."""
    parts = key.split(":")
    return parts[1] if len(parts) >= 3 else None


def _traces(
    store: ConversationStore, key: ConversationKey, records: Sequence[JournalRecord]
) -> dict[str, list[str]]:
    """The traces of the turns *records* hold."""
    found = {turn: store.call_records(key, turn) for turn in fold(records).turns}
    return {turn: lines for turn, lines in found.items() if lines}


def copy_data(
    source: ConversationStore,
    source_config: ConfigStore,
    target: ConversationStore,
    target_config: ConfigStore,
    agents: Iterable[str],
) -> Moved:
    """Copy the conversations and ``system_config`` entries of *agents* from the source
    stores to the target stores (see the module docstring). Refuses, before writing, a
    conversation the target already has."""
    chosen = tuple(check_id(agent, "agent") for agent in agents)
    keys = [
        ConversationKey(agent, meta.conversation_id)
        for agent in chosen
        for meta in source.conversations(agent)
    ]
    taken = [str(key) for key in keys if target.exists(key)]
    if taken:
        shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
        raise UsageError(f"the target already has {shown}: import into an empty store")
    for key in sorted(keys, key=str):
        records = source.journal(key)
        target.restore(key, records, _traces(source, key, records))
    wanted = set(chosen)
    entries = 0
    for name in source_config.keys(""):
        if _entry_agent(name) not in wanted:
            continue
        entry = source_config.get(name)
        if entry is not None:
            target_config.restore(entry)
            entries += 1
    return Moved(conversations=len(keys), entries=entries, agents=chosen)


def export_to(
    source: ConversationStore, source_config: ConfigStore, directory: Path, agents: Iterable[str]
) -> Moved:
    """Write *agents*' conversations and memory to *directory* in the file store's layout."""
    directory.mkdir(parents=True, exist_ok=True)
    files = FileConversationStore(directory)
    with SqliteConfigStore(directory / CONFIG_DB) as config:
        return copy_data(source, source_config, files, config, agents)


def import_from(
    directory: Path,
    target: ConversationStore,
    target_config: ConfigStore,
    agents: Iterable[str] | None = None,
) -> Moved:
    """Load an export (*directory*, the file store's layout) into the target stores: every
    agent it holds, or *agents*."""
    if not DataLayout(directory).agents_dir.is_dir():
        raise UsageError(f"{directory} holds no export (no agents/ folder)")
    chosen = stored_agents(directory) if agents is None else list(agents)
    files = FileConversationStore(directory)
    database = directory / CONFIG_DB
    if not database.is_file():
        raise UsageError(f"{directory} holds no {CONFIG_DB} (system_config)")
    with SqliteConfigStore(database) as config:
        return copy_data(files, config, target, target_config, chosen)
