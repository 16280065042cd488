"""The exception tree. Every error agentkit raises on purpose is an :class:`AgentkitError`.

::

    AgentkitError
    ├── UsageError                 the caller asked for something invalid (nothing was written)
    │   ├── InvalidIdError         an id that is not [A-Za-z0-9][A-Za-z0-9_-]{0,63}
    │   ├── AgentNotFoundError
    │   ├── ConversationNotFoundError
    │   ├── TurnNotFoundError      a message id that names no turn of the conversation
    │   ├── TurnNotFinishedError   a turn with no checkpoint (still running, or cut short)
    │   ├── ConfigError            an agent's config.json is invalid (names file and field)
    │   ├── ModelSpecError         a model spec string that names no usable backend
    │   ├── ApprovalNotFoundError  an approval id that names no pending approval
    │   ├── ApprovalDecidedError   a decision on an approval that was decided already
    │   ├── InvalidApprovalArgsError  edited arguments the tool's schema refuses (nothing ran)
    │   ├── MissingExtraError      a feature whose extra is not installed (names the pip
    │   │                          command); also an ImportError
    │   └── ModelRequestsBlockedError  a real model backend used while agentkit.testing has
    │                              real requests off (no connection was made)
    ├── ConversationBusyError      another writer holds the conversation (bounded wait expired)
    ├── StoreError                 the store could not do its job
    │   ├── CorruptJournalError    a damaged record in the middle of a journal (never dropped)
    │   ├── CorruptStateError      a stored TaskState / ExecutionState that does not validate
    │   ├── StoreUnavailableError  (agentkit.store) the database cannot be reached (HTTP 503)
    │   └── StaleWriterError       (agentkit.store) a write whose fencing epoch is stale
    └── ModelError                 a model backend failed (HTTP, process, timeout)
        └── StructuredOutputError  a reply that does not match the requested JSON schema

Errors carry the fields a caller needs (agent_id, conversation_id, path, offset); they never
log and never print.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AgentNotFoundError",
    "AgentkitError",
    "ApprovalDecidedError",
    "ApprovalNotFoundError",
    "ConfigError",
    "ConversationBusyError",
    "ConversationNotFoundError",
    "CorruptJournalError",
    "CorruptStateError",
    "InvalidApprovalArgsError",
    "InvalidIdError",
    "MissingExtraError",
    "ModelError",
    "ModelRequestsBlockedError",
    "ModelSpecError",
    "StoreError",
    "StructuredOutputError",
    "TurnNotFinishedError",
    "TurnNotFoundError",
    "UsageError",
]


class AgentkitError(Exception):
    """Base of every error agentkit raises on purpose."""


class UsageError(AgentkitError):
    """The request itself is invalid; nothing was written."""


class InvalidIdError(UsageError, ValueError):
    """An id failed the full-match rule; it was never used to build a path."""

    def __init__(self, kind: str, value: object) -> None:
        self.kind = kind
        self.value = value
        super().__init__(
            f"invalid {kind} id {value!r}: ids are 1-64 ASCII letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )


class AgentNotFoundError(UsageError, LookupError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"no agent {agent_id!r}")


class ConversationNotFoundError(UsageError, LookupError):
    def __init__(self, agent_id: str, conversation_id: str) -> None:
        self.agent_id = agent_id
        self.conversation_id = conversation_id
        super().__init__(f"agent {agent_id!r} has no conversation {conversation_id!r}")


class TurnNotFoundError(UsageError, LookupError):
    """A message id that names no turn of the conversation (fork, replay)."""

    def __init__(self, agent_id: str, conversation_id: str, message_id: str) -> None:
        self.agent_id = agent_id
        self.conversation_id = conversation_id
        self.message_id = message_id
        super().__init__(
            f"conversation {agent_id}/{conversation_id} has no turn {message_id!r}; "
            "`agentkit history` lists its message ids"
        )


class TurnNotFinishedError(UsageError):
    """A turn that has no checkpoint: it is still running, or it was cut short (a crash, a
    stopped stream) before it finished, so there is no state to fork from."""

    def __init__(self, agent_id: str, conversation_id: str, message_id: str, why: str) -> None:
        self.agent_id = agent_id
        self.conversation_id = conversation_id
        self.message_id = message_id
        super().__init__(
            f"turn {message_id!r} of {agent_id}/{conversation_id} cannot be forked: {why}"
        )


class ConfigError(UsageError):
    """A configuration file is invalid. ``path`` names the file, ``field`` the offending key."""

    def __init__(self, path: Path, field: str, problem: str) -> None:
        self.path = path
        self.field = field
        self.problem = problem
        where = f" field {field!r}" if field else ""
        super().__init__(f"{path}:{where} {problem}")


class ConversationBusyError(AgentkitError):
    """Another writer (thread or process) held the conversation for longer than we waited."""

    def __init__(self, agent_id: str, conversation_id: str, waited: float) -> None:
        self.agent_id = agent_id
        self.conversation_id = conversation_id
        self.waited = waited
        super().__init__(
            f"conversation {agent_id}/{conversation_id} is busy: another writer held it "
            f"for {waited:.1f}s; retry when its turn has finished"
        )


class StoreError(AgentkitError):
    """The store failed (I/O error, unreadable file). Nothing was acknowledged."""


class CorruptJournalError(StoreError):
    """A journal record failed its checksum and valid records follow it.

    That is damage, not a crash (a crash only tears the tail), so nothing is truncated: a copy
    of the journal is kept at ``quarantine`` and the conversation refuses writes until a person
    looks at it.
    """

    def __init__(self, path: Path, offset: int, reason: str, quarantine: Path | None) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        self.quarantine = quarantine
        kept = f"; a copy was kept at {quarantine}" if quarantine else ""
        super().__init__(f"corrupt journal record at byte {offset} of {path}: {reason}{kept}")


class CorruptStateError(StoreError):
    """A stored memory value does not validate; ``key`` names it, ``problem`` says why."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"stored value {key!r} is not valid: {problem}")


class ModelSpecError(UsageError):
    """A model spec string (``llama``, ``openai:MODEL``, …) that names no usable backend."""

    def __init__(self, spec: str, problem: str) -> None:
        self.spec = spec
        super().__init__(f"model spec {spec!r}: {problem}")


class MissingExtraError(UsageError, ImportError):
    """A feature needs an extra that is not installed: ``pip install 'agentkit[EXTRA]'``.

    ``extra`` names the extra, ``feature`` what needed it, ``name`` the missing module (as on
    any ImportError) and ``hint`` what else would do, if anything. Raised where the feature
    is used, before anything was written or started.
    """

    def __init__(self, extra: str, feature: str, *, module: str, hint: str = "") -> None:
        self.extra = extra
        self.feature = feature
        self.hint = hint
        instead = f" ({hint})" if hint else ""
        super().__init__(
            f"{feature} needs the {extra!r} extra: pip install 'agentkit[{extra}]'{instead}",
            name=module,
        )

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries (eval workers)
        return _missing_extra, (self.extra, self.feature, self.name or "", self.hint)


def _missing_extra(extra: str, feature: str, module: str, hint: str) -> MissingExtraError:
    return MissingExtraError(extra, feature, module=module, hint=hint)


class ApprovalNotFoundError(UsageError, LookupError):
    """No pending approval of that id in the conversation (and none was ever decided)."""

    def __init__(self, conversation_id: str, approval_id: str) -> None:
        self.conversation_id = conversation_id
        self.approval_id = approval_id
        super().__init__(f"conversation {conversation_id!r} has no approval {approval_id!r}")


class ApprovalDecidedError(UsageError):
    """The approval was decided already: a decision is single-use, whoever answers first."""

    def __init__(self, approval_id: str, decision: str, source: str, at: str) -> None:
        self.approval_id = approval_id
        self.decision = decision
        self.source = source
        self.at = at
        super().__init__(
            f"approval {approval_id!r} was already decided: {decision} ({source}, at {at})"
        )


class InvalidApprovalArgsError(UsageError):
    """Edited arguments for an approval that the tool's schema refuses; nothing was run."""

    def __init__(self, approval_id: str, tool_name: str, problem: str) -> None:
        self.approval_id = approval_id
        self.tool_name = tool_name
        self.problem = problem
        super().__init__(f"approval {approval_id!r}: invalid arguments for {tool_name}: {problem}")


class ModelRequestsBlockedError(UsageError):
    """A real backend (llama, openai, acp, claude-cli) was created or called while real model
    requests are off (:mod:`agentkit.testing`); nothing was sent and nothing was written."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        super().__init__(
            f"real model requests are off: {spec!r} was not called (agentkit.testing; "
            "use FunctionModel, ScriptedModel or ScriptedSessionBackend, or allow them with "
            "agentkit.testing.allow_model_requests() / AGENTKIT_ALLOW_MODEL_REQUESTS=1)"
        )


class ModelError(AgentkitError):
    """A model backend failed: HTTP error, dead process, timeout, malformed output."""

    def __init__(
        self,
        backend: str,
        message: str,
        *,
        status_code: int | None = None,
        retryable: bool = False,
    ) -> None:
        self.backend = backend
        self.status_code = status_code
        self.retryable = retryable
        super().__init__(f"{backend}: {message}")


class StructuredOutputError(ModelError):
    """A reply that should have matched a JSON schema did not (``raw`` holds the reply)."""

    def __init__(self, backend: str, problem: str, raw: str) -> None:
        self.problem = problem
        self.raw = raw
        super().__init__(backend, f"structured output did not validate: {problem}")
