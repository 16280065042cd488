"""What ``recover()`` and ``verify()`` of the file store do over every conversation folder.

Both walk ``{root}/agents/*/conversations``: leftovers of interrupted creates and deletes
(``.{id}.creating-…``, ``.{id}.deleted-…``) are removed or reported; each conversation is taken
under its writer lock, without waiting long, so a live writer is never disturbed (busy ones are
left to it, or reported as not checked).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from agentkit.errors import ConversationBusyError, ConversationNotFoundError, StoreError
from agentkit.ids import is_valid_id
from agentkit.layout import JOURNAL_FILE
from agentkit.store._folders import Folders
from agentkit.store._views import verify_conversation
from agentkit.store.base import ConversationKey, Problem, VerifyReport

__all__ = ["CREATING", "DELETED", "recover_folders", "verify_folders"]

CREATING = ".creating-"
DELETED = ".deleted-"


def _leftover(name: str) -> bool:
    return name.startswith(".") and (CREATING in name or DELETED in name)


def recover_folders(store: Folders, agent_id: str | None, *, full: bool) -> list[ConversationKey]:
    """See ``FileConversationStore.recover``."""
    repaired: list[ConversationKey] = []
    for conversations in store.conversation_dirs(agent_id):
        for entry in conversations.iterdir():
            if _leftover(entry.name):
                shutil.rmtree(entry, ignore_errors=True)
                continue
            if not is_valid_id(entry.name) or not (entry / JOURNAL_FILE).is_file():
                continue
            key = ConversationKey(conversations.parent.name, entry.name)
            if not full and store.settled(entry):
                continue
            # A busy conversation is left to its writer; a corrupt one is left for a person
            # (verify() reports it) and does not stop the others' recovery.
            with contextlib.suppress(ConversationBusyError, StoreError), store.hold(key, timeout=0):
                store.repair(key, full=full)
                repaired.append(key)
    return repaired


def verify_folders(store: Folders, agent_id: str | None) -> VerifyReport:
    """See ``FileConversationStore.verify``."""
    problems: list[Problem] = []
    checked = 0
    for conversations in store.conversation_dirs(agent_id):
        agent = conversations.parent.name
        for entry in sorted(conversations.iterdir()):
            if _leftover(entry.name):
                problems.append(Problem(agent, "", "leftover", f"{entry.name} (interrupted)"))
            elif is_valid_id(entry.name) and entry.is_dir():
                checked += 1
                problems.extend(_verify_one(store, ConversationKey(agent, entry.name), entry))
    return VerifyReport(conversations=checked, problems=tuple(problems))


def _verify_one(store: Folders, key: ConversationKey, folder: Path) -> list[Problem]:
    agent, name = key.agent_id, key.conversation_id
    try:
        with store.hold(key, timeout=min(1.0, store.lock_timeout)):
            return verify_conversation(key, folder)
    except ConversationBusyError:
        return [Problem(agent, name, "busy", "a writer held it; not checked")]
    except ConversationNotFoundError:
        return [Problem(agent, name, "missing-file", f"no {JOURNAL_FILE}")]
