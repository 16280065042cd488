"""τ²'s domain environments on databases parsed once per process.

Why this module exists: τ²'s ``get_environment`` parses the domain's database file on every
call, and its evaluator builds two environments per task (the conversation's and the gold
actions'): the airline ``db.json`` is 7 MB, so scoring cost about half a second per task, nearly
all of it parsing. Here each domain's database is parsed once per process and every
environment gets it through the domain's own ``get_environment(db=…)``: the same tools, the
same policy, the same hashing.

An environment's database is a copy-on-write view of the parsed one: its tables (the
database's dicts of records: flights, users, reservations …) hold the parsed records, and a
record is deep-copied into the environment's own table the first time anything but a tool τ²
marks ``READ`` touches it (a write tool, a gold action that writes, an initialisation, an
assertion); a ``READ`` tool reads the parsed records in place. So a conversation costs copies
of the few records it changes, not of the whole database, and the hash of a database nothing
but reads touched is the parsed database's own, computed once; a changed one is hashed by τ²'s
own function, over the same records a full copy would hold. Telecom's environment syncs the
user's device with the line on every call, so it gets whole copies (its databases are small).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from agentkit.eval.tau2._package import tau2_module

__all__ = ["DOMAINS", "constructor", "new_environment", "policy"]

#: the domains agentkit runs (τ²'s ``mock`` is its own test fixture)
DOMAINS: Final = ("airline", "retail", "telecom")
#: a domain's database: (data model module, class, utils constant) per database
_DATABASES: Final[dict[str, tuple[tuple[str, str, str], ...]]] = {
    "airline": (("domains.airline.data_model", "FlightDB", "AIRLINE_DB_PATH"),),
    "retail": (("domains.retail.data_model", "RetailDB", "RETAIL_DB_PATH"),),
    "telecom": (
        ("domains.telecom.data_model", "TelecomDB", "TELECOM_DB_PATH"),
        ("domains.telecom.user_data_model", "TelecomUserDB", "TELECOM_USER_DB_PATH"),
    ),
}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Parsed:
    """A domain's databases as parsed from the wheel, never changed."""

    databases: tuple[Any, ...]


_PARSED: dict[str, _Parsed] = {}


def _parsed(domain: str) -> _Parsed:
    found = _PARSED.get(domain)
    if found is not None:
        return found
    with _LOCK:
        if domain not in _PARSED:
            utils = tau2_module(f"domains.{domain}.utils")
            databases = []
            for module, name, path in _DATABASES[domain]:
                model = getattr(tau2_module(module), name)
                databases.append(model.load(getattr(utils, path)))
            _PARSED[domain] = _Parsed(tuple(databases))
        return _PARSED[domain]


def _copy(database: Any) -> Any:  # noqa: ANN401 - a τ² pydantic database
    """A deep copy (a pickle round trip: about twice as fast as ``copy.deepcopy`` here)."""
    return pickle.loads(pickle.dumps(database, protocol=pickle.HIGHEST_PROTOCOL))  # noqa: S301 - our own bytes


@cache
def _pristine_hash(domain: str) -> str:
    env = tau2_module(f"domains.{domain}.environment").get_environment(
        db=_parsed(domain).databases[0]
    )
    return str(env.get_db_hash())


def new_environment(domain: str, *, solo_mode: bool = False) -> Any:  # noqa: ANN401 - τ²'s
    """A fresh environment of *domain* as τ²'s ``get_environment`` makes it, on the parsed
    database (copied where it may change; see the module docstring)."""
    module = tau2_module(f"domains.{domain}.environment")
    parsed = _parsed(domain)
    if domain == "telecom":
        db, user_db = (_copy(database) for database in parsed.databases)
        return module.get_environment(db=db, user_db=user_db, solo_mode=solo_mode)
    calls = _Calls()
    env = module.get_environment(db=_on_write(parsed.databases[0], calls), solo_mode=solo_mode)
    _watch(env, domain, calls)
    return env


class _Calls:
    """What runs on an environment now: a ``READ`` tool (which reads the parsed records in
    place) or anything else (which gets its own copy of each record it touches); and what
    ran that may have changed the database, in order (the key of its hash)."""

    def __init__(self) -> None:
        self.reading = False
        #: everything but READ tools that ran, in order: the database is a function of it
        self.written: list[str] = []

    def wrote(self, *what: Any) -> None:  # noqa: ANN401
        self.written.append(json.dumps(what, sort_keys=True, default=str))


class _Records(dict[str, Any]):
    """A table of the parsed database whose records are copied on first touch by anything
    but a ``READ`` tool; a record set anew is the environment's own."""

    def __init__(self, parsed: dict[str, Any], calls: _Calls) -> None:
        super().__init__(parsed)
        self.own: set[str] = set()
        self._calls = calls

    def _mine(self, key: str, value: Any) -> Any:  # noqa: ANN401 - a τ² record
        if self._calls.reading or key in self.own:
            return value
        value = value.model_copy(deep=True) if hasattr(value, "model_copy") else _copy(value)
        dict.__setitem__(self, key, value)
        self.own.add(key)
        return value

    def __getitem__(self, key: str) -> Any:  # noqa: ANN401
        return self._mine(key, dict.__getitem__(self, key))

    def get(self, key: str, default: Any = None) -> Any:  # noqa: ANN401
        if key not in self:
            return default
        return self[key]

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self._mine(key, value) for key, value in dict.items(self)]

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(key, self._mine(key, value)) for key, value in dict.items(self)]

    def __setitem__(self, key: str, value: Any) -> None:  # noqa: ANN401
        dict.__setitem__(self, key, value)
        self.own.add(key)

    def pop(self, key: str, *default: Any) -> Any:  # noqa: ANN401
        self.own.discard(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:  # noqa: ANN401
        if key not in self:
            self[key] = default
        return self[key]


def _on_write(parsed: Any, calls: _Calls) -> Any:  # noqa: ANN401 - a τ² database
    """A database whose tables hold the parsed records until something touches them."""
    fields = {}
    for name in type(parsed).model_fields:
        value = getattr(parsed, name)
        fields[name] = _Records(value, calls) if isinstance(value, dict) else _copy(value)
    return type(parsed).model_construct(**fields)


#: the JSON text of each parsed record, as τ²'s hash writes it, by (domain, table, key)
_TEXTS: dict[tuple[str, str, str], str] = {}


def _text(value: Any) -> str:  # noqa: ANN401 - a record, or a table's other value
    dumped = value.model_dump() if hasattr(value, "model_dump") else value
    return json.dumps(dumped, sort_keys=True, default=str)


def _hash(domain: str, db: Any) -> str:  # noqa: ANN401 - a τ² database
    """τ²'s hash of *db* (``get_dict_hash(db.model_dump())``: the SHA-256 of
    ``json.dumps(…, sort_keys=True, default=str)``), written from each record's own JSON text —
    the parsed records' kept from one hash to the next — instead of the whole database's at
    once. ``json.dumps`` of a mapping is its members' texts joined in key order, so the text
    is the same (a test checks the hashes against τ²'s own)."""
    digest = hashlib.sha256()
    parts = []
    for name in sorted(type(db).model_fields):
        table = getattr(db, name)
        if isinstance(table, _Records):
            members = []
            for key, record in sorted(dict.items(table)):
                if key in table.own:
                    text = _text(record)
                else:
                    text = _TEXTS.get((domain, name, key)) or _TEXTS.setdefault(
                        (domain, name, key), _text(record)
                    )
                members.append(f"{json.dumps(key)}: {text}")
            body = "{" + ", ".join(members) + "}"
        else:
            body = json.dumps(db.model_dump(include={name})[name], sort_keys=True, default=str)
        parts.append(f"{json.dumps(name)}: {body}")
    digest.update(("{" + ", ".join(parts) + "}").encode())
    return digest.hexdigest()


#: τ²'s hash of a database by what changed it (the domain's tools are deterministic: the same
#: calls on the parsed database give the same database), the latest few thousand
_HASHES: OrderedDict[tuple[str, tuple[str, ...]], str] = OrderedDict()
_HASHES_KEPT = 4096


def _watch(env: Any, domain: str, calls: _Calls) -> None:  # noqa: ANN401
    """Tell *env*'s tables what runs, and answer the hash of a database nothing changed."""
    tools = env.tools
    read = tau2_module("environment.toolkit").ToolType.READ
    make_tool_call, run_function, update_db = (
        env.make_tool_call,
        env.run_env_function_call,
        tools.update_db,
    )

    def make(tool_name: str, requestor: str = "assistant", **kwargs: Any) -> Any:  # noqa: ANN401
        reading = tools.has_tool(tool_name) and tools.tool_type(tool_name) == read
        if not reading:
            calls.wrote("call", tool_name, requestor, kwargs)
        calls.reading = reading
        try:
            return make_tool_call(tool_name, requestor=requestor, **kwargs)
        finally:
            calls.reading = False

    def run(call: Any) -> Any:  # noqa: ANN401
        calls.wrote("function", call.model_dump(mode="json"))
        return run_function(call)

    def update(data: Any = None) -> None:  # noqa: ANN401
        calls.wrote("update", data)
        update_db(data)

    def db_hash() -> str | None:
        if not calls.written:
            return _pristine_hash(domain)
        key = (domain, tuple(calls.written))
        found = _HASHES.get(key)
        if found is None:
            found = _HASHES[key] = _hash(domain, tools.db)
            while len(_HASHES) > _HASHES_KEPT:
                _HASHES.popitem(last=False)
        return found

    env.make_tool_call = make
    env.run_env_function_call = run
    tools.update_db = update
    env.get_db_hash = db_hash


def constructor(domain: str) -> Callable[..., Any]:
    """What τ²'s registry gives its evaluator for *domain*: ``(solo_mode=False) -> env``."""

    def make(solo_mode: bool = False) -> Any:  # noqa: ANN401
        return new_environment(domain, solo_mode=solo_mode)

    return make


@cache
def policy(domain: str) -> str:
    """The agent's policy of *domain*, as τ²'s environment gives it."""
    return str(new_environment(domain).get_policy())
