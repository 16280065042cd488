"""A conversation's whole history, read at once and decoded message by message on use.

Why: building a validated :class:`~agentkit.types.Message` costs several times the JSON parse
of its entry, and parsing 100k entries alone costs about what ``json.load`` does (measured:
31 MB, ``json.load`` ~170 ms, pydantic-core's parser ~140 ms, parse + validate ~450 ms). A
reader of a long conversation mostly wants its length, a page or its end. ``history.json``
holds one entry per line (the store writes it so, and JSON text never holds a raw newline),
so :func:`~agentkit.store._views.read_history_view` reads the file, whose size its checkpoint
proves to be the journal's view, splits it into lines and hands out this sequence: entry *i*
is parsed and validated the first time it is read (pydantic-core, in one pass) and kept.

An entry that does not validate (the view was edited by hand, keeping its size) makes the
sequence take the whole history from the journal instead, once: a reader never sees a damaged
view's entry, nor an error for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from pydantic import TypeAdapter, ValidationError

from agentkit.types import Message

__all__ = ["LazyMessages"]

#: from this many unread entries on, iterating decodes them all at once
_BULK = 64


@functools.cache
def _adapter() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


class LazyMessages(Sequence[Message]):
    """Read-only, list-like (``len``, indexing, slices, iteration, ``==`` with a list)."""

    __slots__ = ("_fallback", "_items")

    def __init__(self, entries: list[bytes], fallback: Callable[[], list[Message]]) -> None:
        #: an entry's JSON text (without its separating comma) until read, then its Message
        self._items: list[bytes | Message] = list(entries)
        self._fallback = fallback

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self._message(i) for i in range(*index.indices(len(self._items)))]
        if index < 0:
            index += len(self._items)
        if not 0 <= index < len(self._items):
            raise IndexError("message index out of range")
        return self._message(index)

    def __iter__(self) -> Iterator[Message]:
        self._decode_all()  # whoever reads on from the start most likely reads everything
        for index in range(len(self._items)):
            yield self._message(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a sequence of values, as a list

    def __repr__(self) -> str:
        return f"LazyMessages({len(self._items)} messages)"

    def _decode_all(self) -> None:
        """Every entry not read yet, in one pydantic-core pass (~3x faster than one by one)."""
        waiting: list[int] = []
        entries: list[bytes] = []
        for index, item in enumerate(self._items):
            if isinstance(item, bytes):
                waiting.append(index)
                entries.append(item)
        if len(entries) < _BULK:
            return
        try:
            messages = _adapter().validate_json(b"[" + b",".join(entries) + b"]")
        except ValidationError:
            self._items = list(self._fallback())
            return
        for index, message in zip(waiting, messages, strict=True):
            self._items[index] = message

    def _message(self, index: int) -> Message:
        item = self._items[index]
        if isinstance(item, Message):
            return item
        try:
            message = Message.model_validate_json(item)
        except ValidationError:
            self._items = list(self._fallback())  # the journal decides, for every entry
            found = self._items[index]
            assert isinstance(found, Message)
            return found
        self._items[index] = message
        return message
