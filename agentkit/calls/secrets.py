"""The one secret mask: tool results, prompts, the journal, events, transcripts, spans.

Invariant: a secret (an API key, a secret key, a passphrase, a token, …) is stored raw only in
the domain's own storage (a toolset's database). Everything that leaves a tool (its
:class:`~agentkit.tools.ToolResult`) goes through :func:`mask_secrets`, and free text that may
quote a secret (an error message, a log line, a prompt) goes through :func:`scrub_text` with the
secret values the domain knows.

Wherever a turn writes or shows text (ExecutionState, TaskState, the journal and turn log,
call records, spans, events, widgets, an evaluation's transcripts, exports and reports), one
:class:`SecretMask` does the masking (it lives beneath the engines, with the call tracer,
because everything that writes text imports it downward): the values of secret-named keys,
every value the secret store holds, and what a toolset's declared secret patterns match (a
key the user types in a request, before any tool has stored it).

A masked value keeps at most its last 4 characters, and only when the secret is long enough
(12 characters or more) that 4 characters reveal little: ``"sk-live-0123456789abcd"`` becomes
``"****abcd"``, ``"short"`` becomes ``"****"``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from pydantic import JsonValue

__all__ = [
    "MASK",
    "SecretMask",
    "Secrets",
    "StreamMask",
    "is_masked",
    "is_secret_key",
    "mask_secrets",
    "mask_value",
    "scrub_text",
]

MASK = "****"
"""What replaces a secret (followed by its last 4 characters when it is long)."""

_KEEP_TAIL_FROM = 12
_MIN_SCRUB_LENGTH = 4
_SECRET_WORDS = frozenset({"secret", "passphrase", "password", "passwd", "token", "apikey"})
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
_WORD_RE = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@functools.lru_cache(maxsize=4096)  # keys are few and repeat in every value a turn masks
def is_secret_key(key: str) -> bool:
    """True when a JSON key names a secret: ``api_key``, ``secretKey``, ``passphrase``, …

    Keys are split into words (snake_case, kebab-case and camelCase alike) so that
    ``max_tokens`` or ``input_tokens`` are not taken for ``token``.
    """
    words = [word.lower() for word in _WORD_RE.findall(key)]
    if any(word in _SECRET_WORDS for word in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in pairwise(words))


def is_masked(value: str) -> bool:
    """True for what :func:`mask_value` returns (``"****"`` or ``"****abcd"``)."""
    return value.startswith(MASK) and len(value) <= len(MASK) + 4


def mask_value(secret: str) -> str:
    """``"****abcd"`` for a long secret, ``"****"`` for a short one, ``""`` for ``""``; a value
    that is already masked stays as it is (masking twice must not lose the shown tail)."""
    if not secret:
        return ""
    if is_masked(secret):
        return secret
    if len(secret) >= _KEEP_TAIL_FROM:
        return MASK + secret[-4:]
    return MASK


def mask_secrets(value: JsonValue, known: Iterable[str] = ()) -> JsonValue:
    """A copy of *value* with every secret-named key's string value masked, at any depth,
    and every *known* secret value scrubbed from the remaining strings (see :func:`scrub_text`).
    """
    secrets = _scrub_list(known)
    return _mask(value, secrets)


def scrub_text(text: str, known: Iterable[str]) -> str:
    """*text* with each *known* secret value replaced by its mask (longest first).

    Values shorter than 4 characters are ignored: scrubbing them would mangle ordinary text
    and they protect nothing.
    """
    return _scrub(text, _scrub_list(known))


def _scrub_list(known: Iterable[str]) -> list[str]:
    unique = {secret for secret in known if len(secret) >= _MIN_SCRUB_LENGTH}
    return sorted(unique, key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, mask_value(secret))
    return text


def _mask(value: JsonValue, secrets: list[str]) -> JsonValue:
    if isinstance(value, dict):
        masked: dict[str, JsonValue] = {}
        for key, item in value.items():
            if is_secret_key(key) and isinstance(item, str):
                masked[key] = mask_value(item)
            else:
                masked[key] = _mask(item, secrets)
        return masked
    if isinstance(value, list):
        return [_mask(item, secrets) for item in value]
    if isinstance(value, str) and secrets:
        return _scrub(value, secrets)
    return value


@dataclass(frozen=True)
class SecretMask:
    """Masks every secret a turn knows in the text and JSON it writes or shows (see the
    module docstring). *known* returns the secret store's values now (called on each use:
    a tool may have stored a new one); *patterns* are the toolsets' declared secret formats."""

    known: Callable[[], Sequence[str]] | None = None
    #: what a pattern matches is masked (with groups: only what the groups match)
    patterns: tuple[re.Pattern[str], ...] = field(default=())
    #: secret values met on the way (a planned step's secret-named arguments): one turn's
    #: mask learns them (:meth:`for_turn`, :meth:`learn`)
    learned: set[str] = field(default_factory=set, compare=False)
    #: what the patterns left of a text, by text: the same history goes into every prompt of
    #: every turn, and a pattern pass depends only on the (fixed) patterns and the text;
    #: shared by the turn copies of one registry's mask, bounded by :data:`_MEMO_SIZE`
    memo: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def for_turn(self) -> SecretMask:
        """A copy that learns for one turn only."""
        return SecretMask(self.known, self.patterns, memo=self.memo)

    def values_only(self) -> SecretMask:
        """This mask without its patterns (sharing what it learns): for what is sent to the
        model, which needs the key the user just typed to plan a call with it; what is
        written or shown is masked by the whole mask."""
        return SecretMask(self.known, (), self.learned)

    def learn(self, values: Iterable[str]) -> None:
        """Mask *values* from now on (in this mask and its turn)."""
        self.learned.update(value for value in values if len(value) >= _MIN_SCRUB_LENGTH)

    def learn_json(self, value: JsonValue) -> None:
        """Learn the values of *value*'s secret-named keys, at any depth, JSON texts inside
        it read too (a model's reply that plans a call with keys: its raw text is masked of
        them from then on)."""
        if isinstance(value, dict):
            for key, item in value.items():
                if is_secret_key(key) and isinstance(item, str):
                    self.learn((item,))
                else:
                    self.learn_json(item)
        elif isinstance(value, list):
            for item in value:
                self.learn_json(item)
        elif isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
            parsed = _json_of(value)
            if parsed is not None:
                self.learn_json(parsed)

    @classmethod
    def of(cls, secrets: Secrets) -> SecretMask:
        """*secrets* as a mask: a mask as it is; values (a list, or a function read once,
        when first needed) as a mask of those values."""
        if isinstance(secrets, SecretMask):
            return secrets
        if callable(secrets):
            return cls(_once(secrets))
        values = tuple(secrets)
        return cls(lambda: values) if values else cls()

    def apart(self) -> SecretMask:
        """A mask that masks all this one does (now and as it learns) but learns apart from
        it: what a trace learns from what it records stays the trace's."""
        return SecretMask(self.values, self.patterns, memo=self.memo)

    def json_text(self, text: str) -> str:
        """*text* masked as :meth:`text` does; a JSON object or array text is masked inside
        (its secret-named keys' values too, see :meth:`deep`) and written back as JSON."""
        if text.lstrip()[:1] in ("{", "["):
            value = _json_of(text)
            if value is not None:
                return json.dumps(self.deep(value), ensure_ascii=False)
        return self.text(text)

    def deep(self, value: JsonValue) -> JsonValue:
        """:meth:`json`, with the JSON texts in its strings masked inside too."""
        return _mask_with(value, self.json_text)

    @classmethod
    def compile(cls, patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
        """Declared patterns, compiled once (an invalid one is a ValueError naming it), and
        joined into one alternation where they can be (one pass over a text, not one per
        pattern)."""
        compiled = []
        for pattern in dict.fromkeys(patterns):
            try:
                compiled.append(re.compile(pattern))
            except re.error as error:
                raise ValueError(f"invalid secret pattern {pattern!r}: {error}") from None
        if len(compiled) < 2:
            return tuple(compiled)
        try:
            return (re.compile("|".join(_alternative(p) for p in compiled)),)
        except re.error:  # e.g. back-references: kept apart
            return tuple(compiled)

    def values(self) -> list[str]:
        known = list(self.known()) if self.known is not None else []
        return _scrub_list([*known, *self.learned]) if known or self.learned else []

    def is_empty(self) -> bool:
        """True when there is nothing to mask but secret-named keys (no pattern, no value)."""
        return not self.patterns and not self.values()

    def text(self, text: str) -> str:
        """*text* with every known value and every pattern's match masked."""
        if not text:
            return text
        if self.known is not None or self.learned:
            text = _scrub(text, self.values())
        return self._patterned(text)

    def json(self, value: JsonValue) -> JsonValue:
        """A copy of *value* with secret-named keys' values masked at any depth, and every
        string masked as :meth:`text` does."""
        secrets = self.values()
        if not self.patterns:
            return _mask(value, secrets)
        return _mask_with(value, lambda text: self._patterned(_scrub(text, secrets)))

    def _patterned(self, text: str) -> str:
        if not self.patterns or not text:
            return text
        memo = self.memo
        done = memo.get(text)
        if done is not None:
            return done
        masked = text
        for pattern in self.patterns:
            masked = pattern.sub(_masked_match, masked)
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[text] = masked
        return masked

    def stream(self) -> StreamMask:
        """A masker for text that arrives in pieces (a streamed reply)."""
        return StreamMask(self)


Secrets = SecretMask | Callable[[], Iterable[str]] | Iterable[str]
"""What a caller gives to mask by value (:meth:`SecretMask.of`): a mask, or the secret values
themselves — a list, or a function called once, when first needed."""


class StreamMask:
    """Masks a text that arrives in pieces: each piece is passed on up to its last
    whitespace, masked, and the rest held back until more comes (a secret written without a
    space is never split between two pieces); :meth:`flush` passes on what is held."""

    def __init__(self, mask: SecretMask) -> None:
        self._mask = mask
        self._held = ""

    def feed(self, piece: str) -> str:
        if not self._held and self._mask.is_empty():  # nothing to mask: as it comes
            return piece
        text = self._held + piece
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
        if cut < 0:
            self._held = text
            return ""
        self._held = text[cut + 1 :]
        return self._mask.text(text[: cut + 1])

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._mask.text(held)


_MEMO_SIZE = 4096
"""Texts a mask remembers its pattern pass for (then it starts over)."""

_GLOBAL_FLAGS = re.compile(r"^\(\?[aiLmsux]+\)")
_SCOPED = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))


def _alternative(pattern: re.Pattern[str]) -> str:
    """*pattern* as one branch of an alternation: its flags scoped to it, and (without
    groups of its own) one group around it, so that what it matches is what is masked."""
    body = _GLOBAL_FLAGS.sub("", pattern.pattern)
    flags = "".join(letter for flag, letter in _SCOPED if pattern.flags & flag)
    if pattern.groups == 0:
        body = f"({body})"
    return f"(?{flags}:{body})" if flags else f"(?:{body})"


def _masked_match(match: re.Match[str]) -> str:
    """A pattern's match, masked: the whole of it, or (a pattern with groups, e.g. the value
    after the word "key") only what its groups matched."""
    if match.re.groups == 0:
        return mask_value(match.group(0))
    text, start = match.group(0), match.start()
    pieces, last = [], 0
    for index in range(1, match.re.groups + 1):
        if match.group(index) is None:
            continue
        begin, end = match.start(index) - start, match.end(index) - start
        if begin < last:
            continue
        pieces += [text[last:begin], mask_value(text[begin:end])]
        last = end
    return "".join(pieces) + text[last:]


def _json_of(text: str) -> dict[str, JsonValue] | list[JsonValue] | None:
    """The object or array a JSON text holds; None for any other text."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def _once(source: Callable[[], Iterable[str]]) -> Callable[[], Sequence[str]]:
    """*source*, called the first time it is asked and remembered."""
    found: list[Sequence[str]] = []

    def values() -> Sequence[str]:
        if not found:
            found.append(tuple(source()))
        return found[0]

    return values


def _mask_with(value: JsonValue, text: Callable[[str], str]) -> JsonValue:
    if isinstance(value, dict):
        return {
            key: mask_value(item)
            if is_secret_key(key) and isinstance(item, str)
            else _mask_with(item, text)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_mask_with(item, text) for item in value]
    if isinstance(value, str):
        return text(value)
    return value
