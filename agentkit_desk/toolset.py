"""The desk's tools and its toolset: what desk agents name in their config.json.

``{"python": "agentkit_desk:toolset"}`` gives an agent the ten desk tools over the SQLite file
in its workspace (reads are ``live_state``, writes ``side_effect``), the database's secrets to
scrub, and the desk's state for evaluation: :meth:`DeskToolset.snapshot` (what a scenario's
``expect: {state: {desk: …}}`` is matched against) and :meth:`DeskToolset.seed` (a scenario's
``state: {desk: …}``, validated by :class:`DeskState`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

from agentkit.tools import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    Toolset,
    parse_json_args,
)
from pydantic import BaseModel, ConfigDict, Field, JsonValue, SecretStr, StringConstraints

from agentkit_desk.database import DeskDatabase, open_desk

__all__ = ["DeskState", "DeskToolset", "desk_tools", "run_desk_tool", "toolset"]

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Secret = Annotated[SecretStr, Field(min_length=1, max_length=500)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(_Args):
    pass


class CreateModelConfigArgs(_Args):
    provider: Text = Field(description="e.g. deepseek, openai, qwen")
    model: Text = Field(description="the model name at that provider")
    api_key: Secret | None = None


class CreateExchangeConfigArgs(_Args):
    exchange: Text = Field(description="e.g. binance, okx, hyperliquid")
    account_name: Text
    api_key: Secret
    secret_key: Secret


class CreateTraderArgs(_Args):
    name: Name
    exchange_id: Text = Field(description="an id from get_exchange_configs, e.g. ex-1")
    model_id: Text = Field(description="an id from get_model_configs, e.g. model-1")


class UpdateTraderArgs(_Args):
    trader_id: Text = Field(description="an id from list_traders, e.g. trader-1")
    name: Name | None = None
    exchange_id: Text | None = None
    model_id: Text | None = None


class DeleteTraderArgs(_Args):
    trader_id: Text = Field(description="an id from list_traders, e.g. trader-1")


class SetPreferenceArgs(_Args):
    key: Name
    value: JsonValue


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


def desk_tools(
    db: DeskDatabase, *, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
) -> ToolRegistry:
    """The ten desk tools over *db*. Reads are ``live_state``; writes are ``side_effect``."""

    def get_model_configs(_: NoArgs) -> object:
        return {"model_configs": db.model_configs()}

    def get_exchange_configs(_: NoArgs) -> object:
        return {"exchange_configs": db.exchange_configs()}

    def list_traders(_: NoArgs) -> object:
        return {"traders": db.traders()}

    def create_model_config(args: CreateModelConfigArgs) -> object:
        return db.add_model_config(args.provider, args.model, _secret(args.api_key))

    def create_exchange_config(args: CreateExchangeConfigArgs) -> object:
        return db.add_exchange_config(
            args.exchange,
            args.account_name,
            args.api_key.get_secret_value(),
            args.secret_key.get_secret_value(),
        )

    def create_trader(args: CreateTraderArgs) -> object:
        return db.add_trader(args.name, args.exchange_id, args.model_id)

    def update_trader(args: UpdateTraderArgs) -> object:
        return db.update_trader(
            args.trader_id, name=args.name, exchange_id=args.exchange_id, model_id=args.model_id
        )

    def delete_trader(args: DeleteTraderArgs) -> object:
        return {"deleted": True, "trader": db.delete_trader(args.trader_id)}

    def get_preferences(_: NoArgs) -> object:
        return {"preferences": db.preferences()}

    def set_preference(args: SetPreferenceArgs) -> object:
        db.set_preference(args.key, args.value)
        return {"key": args.key, "value": args.value}

    return ToolRegistry(
        [
            Tool(
                name="get_model_configs",
                description="List the AI model configs (id, provider, model; keys masked).",
                args_model=NoArgs,
                handler=get_model_configs,
                side_effect=False,
                live_state=True,
                examples=(
                    "which AI models are configured?",
                    "show my model configs",
                    "我配置了哪些模型",
                ),
            ),
            Tool(
                name="get_exchange_configs",
                description="List the exchange accounts (id, exchange, account; keys masked).",
                args_model=NoArgs,
                handler=get_exchange_configs,
                side_effect=False,
                live_state=True,
                examples=(
                    "list my exchange accounts",
                    "which exchanges are connected?",
                    "看看我的交易所账户",
                ),
            ),
            Tool(
                name="list_traders",
                description="List the traders with their exchange_id and model_id.",
                args_model=NoArgs,
                handler=list_traders,
                side_effect=False,
                live_state=True,
                examples=("show my traders", "what traders do I have?", "列出所有交易员"),
            ),
            Tool(
                name="create_model_config",
                description="Add an AI model config; returns the new record with its id.",
                args_model=CreateModelConfigArgs,
                handler=create_model_config,
                side_effect=True,
                live_state=False,
                examples=(
                    "add a deepseek model config",
                    "set up an OpenAI model with my key",
                    "添加一个模型配置",
                ),
            ),
            Tool(
                name="create_exchange_config",
                description="Add an exchange account (simulated); returns the record with its id.",
                args_model=CreateExchangeConfigArgs,
                handler=create_exchange_config,
                side_effect=True,
                live_state=False,
                examples=(
                    "connect my Binance account",
                    "add an OKX exchange account with my API key",
                    "绑定交易所账户",
                ),
            ),
            Tool(
                name="create_trader",
                description="Create a trader on an existing exchange account and model config.",
                args_model=CreateTraderArgs,
                handler=create_trader,
                side_effect=True,
                live_state=False,
                examples=(
                    "create a trader on Binance with gpt-4o",
                    "make a new trader",
                    "新建一个交易员",
                ),
            ),
            Tool(
                name="update_trader",
                description="Rename a trader or change its exchange_id/model_id.",
                args_model=UpdateTraderArgs,
                handler=update_trader,
                side_effect=True,
                live_state=False,
                examples=(
                    "rename trader-1 to Beta",
                    "switch my trader to another model",
                    "修改交易员的名字",
                ),
            ),
            Tool(
                name="delete_trader",
                description="Delete a trader.",
                args_model=DeleteTraderArgs,
                handler=delete_trader,
                side_effect=True,
                live_state=False,
                examples=("delete trader-2", "remove a trader I no longer need", "删除这个交易员"),
            ),
            Tool(
                name="get_preferences",
                description="Read the user's saved preferences.",
                args_model=NoArgs,
                handler=get_preferences,
                side_effect=False,
                live_state=True,
                examples=("what are my preferences?", "show my saved settings", "查看我的偏好设置"),
            ),
            Tool(
                name="set_preference",
                description="Save a user preference (key, JSON value).",
                args_model=SetPreferenceArgs,
                handler=set_preference,
                side_effect=True,
                live_state=False,
                examples=(
                    "remember that I prefer English",
                    "set my default exchange to OKX",
                    "保存偏好",
                ),
            ),
        ],
        max_output_chars=max_output_chars,
        secrets=db.secret_values,
    )


# -- the toolset --------------------------------------------------------------------------------

#: the formats of the keys the desk stores, so that a key the user types is masked before any
#: tool has stored it: the value said after "api key" / "secret" / "key" / "token" /
#: "password" / "passphrase" (密钥, 秘钥) when it has a digit (a word like "window" is no key),
#: OpenAI-style ``sk-`` keys, UUIDs (OKX), and long
#: random strings (Binance's 64-character keys)
SECRET_PATTERNS: tuple[str, ...] = (
    r"(?i)\b(?:api[ _-]?key|secret(?:[ _-]?key)?|key|token|password|passphrase)\b"
    r"['\"]?(?:\s+is)?\s*[:=\uff1a]?\s*['\"]?"
    r"(?=[A-Za-z0-9_\-./+=]*[0-9])([A-Za-z0-9][A-Za-z0-9_\-./+=]{5,})",
    r"(?:密钥|秘钥|口令|密码)\s*[:=\uff1a是为]?\s*([A-Za-z0-9][A-Za-z0-9_\-./+=]{5,})",
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    r"\b[A-Za-z0-9]{32,}\b",
)

_Value = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeskModelConfig(_Strict):
    provider: _Value
    model: _Value
    api_key: str | None = None


class DeskExchangeConfig(_Strict):
    exchange: _Value
    account_name: _Value
    api_key: _Value
    secret_key: _Value


class DeskTrader(_Strict):
    name: _Value
    exchange_id: _Value = Field(description="e.g. ex-1: ids follow the order of the lists above")
    model_id: _Value


class DeskState(_Strict):
    """The desk a run starts from (rows are added in order, so ids are ``model-1``…,
    ``ex-1``…, ``trader-1``…)."""

    model_configs: tuple[DeskModelConfig, ...] = ()
    exchange_configs: tuple[DeskExchangeConfig, ...] = ()
    traders: tuple[DeskTrader, ...] = ()
    preferences: dict[str, JsonValue] = Field(default_factory=dict)


class DeskToolset(Toolset):
    """The desk tools over ``{workspace}/desk.db`` (opened on first use, closed by
    :meth:`close`)."""

    name = "desk"
    state_model = DeskState

    def __init__(self, workspace: Path) -> None:
        self.db = open_desk(workspace)
        registry = desk_tools(self.db)
        self._tools = tuple(registry.get(name) for name in registry.names())

    def tools(self) -> Sequence[Tool[Any]]:
        return self._tools

    def secrets(self) -> Iterable[str]:
        return self.db.secret_values()

    def secret_patterns(self) -> Sequence[str]:
        return SECRET_PATTERNS

    def snapshot(self) -> JsonValue:
        """Trader names (sorted) and their fields, row counts, and the preferences."""
        traders = self.db.traders()
        names: list[JsonValue] = [name for name in sorted(trader.name for trader in traders)]
        return {
            "traders": names,
            "trader_count": len(traders),
            "model_config_count": len(self.db.model_configs()),
            "exchange_config_count": len(self.db.exchange_configs()),
            "preferences": self.db.preferences(),
            "trader_fields": {
                trader.name: {
                    "id": trader.id,
                    "exchange_id": trader.exchange_id,
                    "model_id": trader.model_id,
                }
                for trader in traders
            },
        }

    def seed(self, state: JsonValue) -> None:
        desk = DeskState.model_validate(state)
        db = self.db
        for model_config in desk.model_configs:
            db.add_model_config(model_config.provider, model_config.model, model_config.api_key)
        for exchange in desk.exchange_configs:
            db.add_exchange_config(
                exchange.exchange, exchange.account_name, exchange.api_key, exchange.secret_key
            )
        for trader in desk.traders:
            db.add_trader(trader.name, trader.exchange_id, trader.model_id)
        for key, value in desk.preferences.items():
            db.set_preference(key, value)

    def close(self) -> None:
        self.db.close()


def toolset(context: ToolContext) -> DeskToolset:
    """The desk of the agent *context* describes (``{workspace}/desk.db``)."""
    return DeskToolset(context.workspace)


def run_desk_tool(workspace: Path, name: str, json_args: str) -> ToolResult:
    """Run one desk tool once on the desk in *workspace* (every desk tool, no allow-list)."""
    raw_args = parse_json_args(name, json_args)
    with open_desk(workspace) as db:
        return desk_tools(db).run(name, raw_args)
