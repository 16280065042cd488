"""τ²'s domain environments on databases parsed once per process.

Why this module exists: τ²'s ``get_environment`` parses the domain's database file on every
call, and its evaluator builds two environments per task (the conversation's and the gold
actions'): the airline ``db.json`` is 7 MB, so scoring cost about half a second per task, nearly
all of it parsing. Here each domain's database is parsed once per process and every
environment gets it through the domain's own ``get_environment(db=…)``: the same tools, the
same policy, the same hashing.

The environment starts on the parsed database itself, and takes a private copy the first time
anything may change it (a tool that τ² does not mark ``READ``, an initialisation, an
assertion) — so a conversation or a gold replay that only reads costs no copy, and the hash of
a database nothing changed is the parsed database's own, computed once. Telecom's environment
syncs the user's device with the line on every call, so it always gets its own copies (its
databases are small).
"""

from __future__ import annotations

import pickle
import threading
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
    database (copied when it may change; see the module docstring)."""
    module = tau2_module(f"domains.{domain}.environment")
    parsed = _parsed(domain)
    if domain == "telecom":
        db, user_db = (_copy(database) for database in parsed.databases)
        return module.get_environment(db=db, user_db=user_db, solo_mode=solo_mode)
    env = module.get_environment(db=parsed.databases[0], solo_mode=solo_mode)
    _copy_on_write(env, domain, parsed.databases[0])
    return env


def _copy_on_write(env: Any, domain: str, pristine: Any) -> None:  # noqa: ANN401
    """Give *env* its own copy of the database before anything may change it."""
    tools = env.tools
    read = tau2_module("environment.toolkit").ToolType.READ
    make_tool_call, run_function, update_db = (
        env.make_tool_call,
        env.run_env_function_call,
        tools.update_db,
    )

    def own() -> None:
        if tools.db is pristine:
            tools.db = _copy(pristine)

    def make(tool_name: str, requestor: str = "assistant", **kwargs: Any) -> Any:  # noqa: ANN401
        if not tools.has_tool(tool_name) or tools.tool_type(tool_name) != read:
            own()
        return make_tool_call(tool_name, requestor=requestor, **kwargs)

    def run(call: Any) -> Any:  # noqa: ANN401
        own()
        return run_function(call)

    def update(data: Any = None) -> None:  # noqa: ANN401
        own()
        update_db(data)

    def db_hash() -> str | None:
        if tools.db is pristine:
            return _pristine_hash(domain)
        return tools.get_db_hash()  # type: ignore[no-any-return]

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
