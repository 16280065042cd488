"""An agent's tools are configuration: Python toolsets in its folder, run by the planner."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ConfigError, ScriptedModel
from agentkit.agent_folder import AgentFolder
from agentkit.events import AgentEvent, AskUserEvent, StepCompleteEvent, ToolResultEvent
from agentkit.tools import AgentTools, FunctionToolset, run_tool

SHOP_TOOLS = '''
"""A shop: one read, one write with a nested model and an enum."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agentkit.tools import ToolContext, ToolFailedError, tool


class Size(str, Enum):
    small = "small"
    large = "large"


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    street: str
    city: str


def _orders(ctx: ToolContext) -> list[dict[str, object]]:
    path = ctx.workspace / "orders.json"
    return json.loads(path.read_text()) if path.is_file() else []


@tool(live_state=True)
def list_orders(ctx: ToolContext) -> dict[str, object]:
    """List the orders placed so far."""
    return {"orders": _orders(ctx)}


@tool(side_effect=True, examples=["order a large pizza to 1 Main St"])
def place_order(
    ctx: ToolContext,
    item: Annotated[str, "what to order"],
    ship_to: Address,
    size: Size = Size.small,
    quantity: Annotated[int, Field(ge=1, le=5)] = 1,
) -> dict[str, object]:
    """Place an order (it cannot be undone)."""
    if item == "explode":
        raise RuntimeError("the oven caught fire")
    if item == "unicorn":
        raise ToolFailedError("unicorns are sold out")
    orders = _orders(ctx)
    order = {"item": item, "city": ship_to.city, "size": size.value, "quantity": quantity}
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    (ctx.workspace / "orders.json").write_text(json.dumps([*orders, order]))
    return {"placed": order, "number": len(orders) + 1}
'''


def make_agent(root: Path, agent_id: str, config: dict[str, Any], files: dict[str, str]) -> Path:
    folder = root / "agents" / agent_id
    (folder / "workspace").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


SHOP = {"engine": "planner", "toolsets": [{"python": "tools.py"}]}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    make_agent(tmp_path, "shop", SHOP, {"tools.py": SHOP_TOOLS})
    return tmp_path


def orders(root: Path) -> list[dict[str, Any]]:
    path = root / "agents" / "shop" / "workspace" / "orders.json"
    return json.loads(path.read_text()) if path.is_file() else []


def of(events: list[AgentEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


ORDER = {
    "item": "pizza",
    "ship_to": {"street": "1 Main St", "city": "Springfield"},
    "size": "large",
}


def order_plan(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "plan": [
            {
                "goal": "order",
                "steps": [
                    {"id": "s1", "type": "tool", "title": "order", "tool_name": "place_order",
                     "tool_args": args},
                    {"id": "s2", "type": "respond", "title": "done", "instruction": "Say so."},
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": ["Ordered."],
    }  # fmt: skip


def test_schema_from_type_hints_in_an_agents_tools_file(shop: Path) -> None:
    with AgentTools.load(AgentFolder.load(shop, "shop")) as tools:
        registry = tools.registry
        assert registry.names() == ("list_orders", "place_order")
        place = registry.get("place_order")
        assert place.flags() == ("side_effect",)
        assert place.source == "tools"
        assert place.examples == ("order a large pizza to 1 Main St",)
        schema = place.json_schema()
        props = schema["properties"]
        assert isinstance(props, dict)
        assert props["size"] == {"enum": ["small", "large"], "type": "string", "default": "small"}
        assert props["item"] == {"description": "what to order", "type": "string"}
        assert props["ship_to"]["required"] == ["street", "city"]  # type: ignore[index]
        assert schema["required"] == ["item", "ship_to"]
        assert registry.get("list_orders").flags() == ("read", "live_state")


def test_a_side_effecting_tool_waits_for_consent_and_runs_once_after_yes(shop: Path) -> None:
    with Agent.open("shop", data_dir=shop, model=ScriptedModel(order_plan(ORDER))) as agent:
        first = agent.send("order a large pizza to 1 Main St, Springfield")
        consent = of(first.events, AskUserEvent)
        assert consent and consent[0].kind == "confirmation"
        assert consent[0].tool_name == "place_order"
        assert orders(shop) == []  # nothing before the user's yes
        second = agent.send("yes", first.conversation_id)
        assert second.text == "Ordered."
        results = of(second.events, ToolResultEvent)
        assert [r.name for r in results] == ["place_order"] and results[0].ok
        third = agent.send("yes", first.conversation_id)  # a second yes runs nothing again
        assert not of(third.events, ToolResultEvent) or all(
            r.name != "place_order" for r in of(third.events, ToolResultEvent)
        )
    assert orders(shop) == [
        {"item": "pizza", "city": "Springfield", "size": "large", "quantity": 1}
    ]


def test_a_side_effecting_tool_never_runs_after_no(shop: Path) -> None:
    with Agent.open("shop", data_dir=shop, model=ScriptedModel(order_plan(ORDER))) as agent:
        first = agent.send("order a pizza")
        assert of(first.events, AskUserEvent)
        second = agent.send("no", first.conversation_id)
        assert not of(second.events, ToolResultEvent)
        assert second.result.status == "completed"
    assert orders(shop) == []


def test_bad_arguments_are_refused_before_the_handler(shop: Path) -> None:
    bad = {**ORDER, "size": "gigantic", "quantity": 9}
    script = order_plan(bad)
    script["plan"] = script["plan"] * 2  # the repair round gets the same bad plan
    with Agent.open("shop", data_dir=shop, model=ScriptedModel(script)) as agent:
        turn = agent.send("order a gigantic pizza")
    assert turn.result.status == "failed"
    assert not of(turn.events, AskUserEvent)
    assert orders(shop) == []
    # the same through the CLI's path: refused before anything runs
    with pytest.raises(Exception, match="size"):
        run_tool(AgentFolder.load(shop, "shop"), "place_order", json.dumps(bad))
    assert orders(shop) == []


@pytest.mark.parametrize(("item", "says"), [("explode", "crashed"), ("unicorn", "sold out")])
def test_a_handler_that_raises_fails_its_step_and_the_turn_completes(
    shop: Path, item: str, says: str
) -> None:
    with Agent.open(
        "shop", data_dir=shop, model=ScriptedModel(order_plan({**ORDER, "item": item}))
    ) as agent:
        first = agent.send(f"order a large {item} to 1 Main St, Springfield")
        turn = agent.send("yes", first.conversation_id)
    results = of(turn.events, ToolResultEvent)
    assert len(results) == 1 and not results[0].ok and says in results[0].output
    assert next(e.status for e in of(turn.events, StepCompleteEvent)) == "failed"
    assert turn.result.status == "completed"
    assert orders(shop) == []


def test_tools_given_in_python_join_the_agent(tmp_path: Path) -> None:
    make_agent(tmp_path, "calc", {"engine": "planner"}, {})
    seen: list[int] = []

    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        seen.append(a + b)
        return a + b

    script = {
        "plan": [{"goal": "add", "steps": [
            {"id": "s1", "type": "tool", "title": "add", "tool_name": "add", "tool_args": {"a": 2}},
            {"id": "s2", "type": "respond", "title": "tell"},
        ]}],
        "replan": [{"action": "continue"}],
        "respond": ["3"],
    }  # fmt: skip
    with Agent.open("calc", data_dir=tmp_path, model=ScriptedModel(script), tools=[add]) as agent:
        assert agent.tools.names() == ("add",)
        assert agent.send("add 2 and 1").text == "3"
    assert seen == [3]


def test_an_agent_without_toolsets_has_no_tools(tmp_path: Path) -> None:
    make_agent(tmp_path, "bare", {"engine": "planner"}, {})
    with AgentTools.load(AgentFolder.load(tmp_path, "bare")) as tools:
        assert tools.registry.names() == ()
        assert tools.snapshot() == {}


def test_a_toolset_from_an_installed_module(tmp_path: Path) -> None:
    config = {
        "engine": "planner",
        "toolsets": [{"python": "agentkit_desk:toolset"}],
        "tools": ["list_traders", "create_trader"],
    }
    make_agent(tmp_path, "d1", config, {})
    with AgentTools.load(AgentFolder.load(tmp_path, "d1")) as tools:
        assert tools.registry.names() == ("list_traders", "create_trader")
        assert [toolset.name for toolset in tools.toolsets] == ["desk"]
        assert tools.snapshot()["desk"]["trader_count"] == 0  # type: ignore[index]


def test_a_toolset_object_and_flag_overrides(tmp_path: Path) -> None:
    files = {
        "mine.py": '''
            from agentkit.tools import FunctionToolset, tool

            @tool
            def peek() -> str:
                """Peek."""
                return "x"

            @tool(side_effect=True)
            def poke() -> str:
                """Poke."""
                return "y"

            kit = FunctionToolset("kit", [peek, poke], snapshot=lambda: {"pokes": 0})
        '''
    }
    config = {
        "engine": "planner",
        "toolsets": [
            {"python": "mine.py:kit", "flags": {"poke": {"side_effect": False, "live_state": True}}}
        ],
    }
    make_agent(tmp_path, "k1", config, files)
    with AgentTools.load(AgentFolder.load(tmp_path, "k1")) as tools:
        assert isinstance(tools.toolset("kit"), FunctionToolset)
        assert tools.registry.get("poke").flags() == ("read", "live_state")
        assert tools.snapshot() == {"kit": {"pokes": 0}}


DUPLICATE = '''
from agentkit.tools import tool

@tool
def list_traders() -> list[str]:
    """Also a list."""
    return []
'''


@pytest.mark.parametrize(
    ("config", "files", "field", "problem"),
    [
        ({"toolsets": [{"python": "missing.py"}]}, {}, "toolsets.0", "does not exist"),
        ({"toolsets": [{"python": "../outside.py"}]}, {}, "toolsets.0", "outside the agent"),
        ({"toolsets": [{"python": "t.py"}]}, {"t.py": "import nowhere_at_all\n"}, "toolsets.0",
         "ModuleNotFoundError"),
        ({"toolsets": [{"python": "t.py"}]}, {"t.py": "x = 1\n"}, "toolsets.0", "defines no tools"),
        ({"toolsets": [{"python": "t.py:nope"}]}, {"t.py": "x = 1\n"}, "toolsets.0",
         "no attribute 'nope'"),
        ({"toolsets": [{"python": "no_such_module_here:x"}]}, {}, "toolsets.0", "no module named"),
        ({"toolsets": [{"python": "agentkit_desk:toolset"}, {"python": "t.py"}]},
         {"t.py": DUPLICATE}, "toolsets.1", "'list_traders' of toolset 't' is also defined"),
        ({"toolsets": [{"python": "agentkit_desk:toolset"}], "tools": ["launch_rocket"]}, {},
         "tools", "no toolset has the tool 'launch_rocket'"),
        ({"tools": ["list_traders"]}, {}, "tools", "no toolsets"),
        ({"toolsets": [{"python": "agentkit_desk:toolset", "flags": {"nope": {}}}]}, {},
         "toolsets.0.flags.nope", "has no tool 'nope'"),
        ({"toolsets": [{"mcp": ["x"]}]}, {}, "toolsets.0.name", "Field required"),
        ({"toolsets": [{"pyhton": "t.py"}]}, {}, "toolsets.0", "exactly one of"),
        ({"toolsets": [{"python": "t.py", "nmae": "x"}]}, {}, "toolsets.0.nmae", "unknown key"),
        ({"toolsets": [{"mcp": ["a"], "name": "s"}, {"mcp": ["b"], "name": "s"}]}, {},
         "toolsets", "two toolsets are named 's'"),
        ({"toolsets": [{"mcp": ["no-such-mcp-server-anywhere"], "name": "s"}]}, {}, "toolsets.0",
         "was not found"),
    ],
)  # fmt: skip
def test_toolset_config_errors_name_the_file_and_field_at_open(
    tmp_path: Path, config: dict[str, Any], files: dict[str, str], field: str, problem: str
) -> None:
    folder = make_agent(tmp_path, "bad", {"engine": "planner", **config}, files)
    with pytest.raises(ConfigError) as caught:
        Agent.open("bad", data_dir=tmp_path)
    assert caught.value.path == folder / "config.json"
    assert caught.value.field == field
    assert problem in str(caught.value)
