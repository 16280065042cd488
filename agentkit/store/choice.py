"""Which stores an agent uses: the file store under the data root, or PostgreSQL.

A store is named by a spec: nothing (or ``files``) is the default, the file store in the
seed's layout under the data root with ``system_config`` in ``agentkit.db`` there; a
``postgresql://…`` URL puts conversations *and* ``system_config`` in that database (one
connection pool for both), while agent folders (config, prompts, ``tools.py``) stay on disk
under the data root. The spec comes from ``--store`` on the command line, else
``$AGENTKIT_STORE`` (:func:`resolve_store_spec`), or ``Agent.open(…, store=URL)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.files import FileConversationStore
from agentkit.store.kv import ConfigStore
from agentkit.store.turn_events import TurnEvents

__all__ = ["FILES", "STORE_ENV", "OpenedStores", "open_stores", "resolve_store_spec"]

#: the environment variable naming the store when ``--store`` is not given
STORE_ENV: Final = "AGENTKIT_STORE"
#: the spec of the default: the file store under the data root
FILES: Final = "files"
_SCHEMES: Final = ("postgresql://", "postgres://")


def resolve_store_spec(spec: str | None = None) -> str:
    """*spec*, else ``$AGENTKIT_STORE``, else :data:`FILES`; checked, never opened."""
    chosen = (spec or os.environ.get(STORE_ENV) or FILES).strip()
    if chosen in (FILES, "file") or chosen.startswith(_SCHEMES):
        return FILES if chosen == "file" else chosen
    raise UsageError(
        f"unknown store {chosen!r}: use a postgresql://… URL, or {FILES!r} (the default: "
        "files under the data root)"
    )


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class OpenedStores:
    """The stores a spec named: *config* None means the default (``agentkit.db`` under the
    data root, opened by the agent runtime); *close* closes what was opened here."""

    spec: str
    conversations: ConversationStore
    config: ConfigStore | None = None
    close: Callable[[], None] = _nothing
    #: where running turns' events go (None: this process only, agentkit.store.turn_events)
    events: TurnEvents | None = None

    @property
    def is_files(self) -> bool:
        return self.spec == FILES


def open_stores(
    spec: str | None, data_dir: Path, *, lock_timeout: float = 10.0, processes: int = 1
) -> OpenedStores:
    """Open the stores *spec* names (see :func:`resolve_store_spec`) for the data root
    *data_dir*. A PostgreSQL store is migrated as it opens. *processes* > 1: that many
    processes serve the data root together (``agentkit serve --workers N``), so on the file
    store running turns' events and cancels go through its files
    (:mod:`agentkit.store.file_events`); PostgreSQL shares them always."""
    chosen = resolve_store_spec(spec)
    if chosen == FILES:
        files = FileConversationStore(data_dir, lock_timeout=lock_timeout)
        if processes <= 1:
            return OpenedStores(chosen, files)
        from agentkit.store.file_events import FileTurnEvents

        events = FileTurnEvents(files)
        return OpenedStores(chosen, files, close=events.close, events=events)
    require("postgres", "the PostgreSQL store", "psycopg", "psycopg_pool")
    from agentkit.store._pg import PostgresDatabase
    from agentkit.store.postgres import PostgresConversationStore
    from agentkit.store.postgres_events import PostgresTurnEvents
    from agentkit.store.postgres_kv import PostgresConfigStore

    database = PostgresDatabase(chosen)
    return OpenedStores(
        chosen,
        PostgresConversationStore(database, lock_timeout=lock_timeout),
        PostgresConfigStore(database),
        database.close,
        PostgresTurnEvents(database),
    )
