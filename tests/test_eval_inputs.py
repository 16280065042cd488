"""Evaluation inputs: scenario files and --set/--grid parameters; bad input is a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agentkit.errors import ConfigError, UsageError
from agentkit.eval import grid_points, load_scenario, load_scenarios, parse_grid, parse_sets
from agentkit.eval.params import apply_params, merge_config

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios"

MINIMAL = """\
v: 1
language: en
agent: desk-001
turns:
  - user: hello
    script: {respond: [hi]}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the shipped scenarios ---------------------------------------------------------------------


def test_the_shipped_scenarios_validate_and_cover_both_languages_and_the_flows() -> None:
    scenarios = load_scenarios(SCENARIOS)
    assert len(scenarios) >= 20
    assert {s.language for s in scenarios} == {"zh", "en"}
    assert sum(s.language == "zh" for s in scenarios) >= 8
    assert all(s.scripted for s in scenarios)  # every one runs under --model scripted
    tags = {tag for s in scenarios for tag in s.tags}
    for flow in ("ask_user", "consent", "refusal", "live_state", "out_of_band", "compression",
                 "restart", "tool_loop", "chat", "commands", "secrets"):  # fmt: skip
        assert flow in tags, flow
    assert {s.agent for s in scenarios} == {
        "desk-001",
        "desk-local-001",
        "innovator-001",
        "notes-001",
    }
    # the folder's sub-folders are not read: compression/ holds another kind of file
    assert not any(s.id.startswith("desk_onboarding") for s in scenarios)


def test_tags_select_scenarios_and_an_unknown_tag_is_an_error() -> None:
    chosen = load_scenarios(SCENARIOS, tags=["compression"])
    assert chosen and all("compression" in s.tags for s in chosen)
    with pytest.raises(UsageError, match="no scenario carries any of the tags"):
        load_scenarios(SCENARIOS, tags=["no-such-tag"])


def test_yaml_and_json_files_load_the_same_scenario(tmp_path: Path) -> None:
    yaml_file = write(tmp_path, "hello.yaml", MINIMAL)
    from_yaml = load_scenario(yaml_file)
    assert from_yaml.id == "hello"  # the file name, when the file names none
    data = from_yaml.model_dump(mode="json", exclude_defaults=True)
    json_file = write(tmp_path, "hello.json", json.dumps(data))
    assert load_scenario(json_file) == from_yaml


# -- bad scenario files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            MINIMAL.replace("language: en", "language: en\nlangauge: zh"),
            "field 'langauge' unknown key",
        ),
        (MINIMAL.replace("v: 1", "v: 2"), "field 'v'"),
        (MINIMAL.replace("agent: desk-001", "agent: ../etc"), "field 'agent'"),
        (MINIMAL.replace("script: {respond: [hi]}", "script: {respnd: [hi]}"), "turns.0.script"),
        (MINIMAL.replace("script: {respond: [hi]}", "script: {respond: []}"), "has no replies"),
        (MINIMAL.replace("  - user: hello", "  - user: '  '"), "turns.0.user"),
        ("v: 1\nlanguage: en\nagent: desk-001\nturns: []\n", "field 'turns'"),
        (MINIMAL + "turns: []\n", "the key 'turns' is given twice"),
        ("v: 1\nturns: [unclosed\n", "is not valid YAML (line 3"),
        ("- just\n- a list\n", "must hold a mapping"),
        (MINIMAL.replace("user: hello", "user: yes"), "turns.0.user"),  # YAML's boolean yes
    ],
    ids=[
        "misspelt-key",
        "unknown-version",
        "path-in-agent-id",
        "unknown-purpose",
        "empty-reply-list",
        "blank-message",
        "no-turns",
        "duplicate-key",
        "broken-yaml",
        "not-a-mapping",
        "unquoted-yes",
    ],
)
def test_a_bad_scenario_file_is_an_error_naming_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ("expect: {tools_called: [lsit_traders]}\n", "expect.tools_called.0",
         "unknown tool 'lsit_traders'"),
        ("  - user: again\n    script: {respond: [ok]}\n    before: [{tool: drop_database}]\n",
         "turns.1.before.0.tool", "unknown tool 'drop_database'"),
        ("state: {desk: {traders: [{name: A}]}}\n", "state.desk.traders.0.exchange_id",
         "Field required"),
        ("state: {calendar: {}}\n", "state.calendar", "no toolset 'calendar'"),
        ("expect: {state: {calendar: {count: 1}}}\n", "expect.state.calendar", "no toolset"),
    ],
    ids=["unknown-tool-in-expectations", "unknown-out-of-band-tool", "bad-seed", "unknown-seed",
         "unknown-state"],
)  # fmt: skip
def test_what_a_scenario_names_is_checked_against_the_agents_tools_before_any_run(
    tmp_path: Path, extra: str, field: str, message: str
) -> None:
    from agentkit.eval import plan_runs

    path = write(tmp_path, "bad.yaml", MINIMAL + extra)
    scenario = load_scenario(path)  # the file itself is fine
    with pytest.raises(ConfigError) as caught:
        plan_runs([scenario], model="scripted", data_dir=REPO / "data")
    assert caught.value.path == path
    assert caught.value.field == field
    assert message in str(caught.value)


def test_duplicate_keys_in_json_are_refused_too(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.json", '{"v": 1, "language": "en", "language": "zh"}')
    with pytest.raises(ConfigError, match="the key 'language' is given twice"):
        load_scenario(path)


def test_bad_scenario_paths_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no scenario file or folder"):
        load_scenarios(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no scenario files"):
        load_scenarios(tmp_path / "empty")
    with pytest.raises(ConfigError, match="is not a scenario file"):
        load_scenario(write(tmp_path, "notes.txt", MINIMAL))
    first = write(tmp_path, "one.yaml", MINIMAL.replace("v: 1", "v: 1\nid: same"))
    second = write(tmp_path, "two.yaml", MINIMAL.replace("v: 1", "v: 1\nid: same"))
    with pytest.raises(UsageError, match="scenario id 'same' is used by both"):
        load_scenarios([first, second])


# -- parameters ------------------------------------------------------------------------------


def test_set_and_grid_values_are_converted_by_the_config_field_type() -> None:
    assert parse_sets(["compression.keep_recent=4", "planner.classify=true", "model=llama"]) == {
        "compression.keep_recent": 4,
        "planner.classify": True,
        "model": "llama",
    }
    assert parse_grid(["planner.stage_timeout_scale=1,2.5", 'tools=["[]", "[\\"a\\"]"]']) == {
        "planner.stage_timeout_scale": [1.0, 2.5],
        "tools": [[], ["a"]],
    }
    assert parse_grid(["compression.token_threshold=300, 900,300"]) == {
        "compression.token_threshold": [300, 900]  # duplicates dropped, order kept
    }


def test_grid_points_are_the_product_in_order_with_the_fixed_values_in_each() -> None:
    points = grid_points(
        {"compression.keep_recent": "4"},
        {
            "compression.token_threshold": [300, 900],
            "planner.strategy": ["plan_replan", "tool_loop"],
        },
    )
    key = ("compression.keep_recent", "compression.token_threshold", "planner.strategy")
    assert points == [
        dict(zip(key, (4, 300, "plan_replan"), strict=True)),
        dict(zip(key, (4, 300, "tool_loop"), strict=True)),
        dict(zip(key, (4, 900, "plan_replan"), strict=True)),
        dict(zip(key, (4, 900, "tool_loop"), strict=True)),
    ]
    assert grid_points() == [{}]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("compression.token_treshold=300", "unknown config key 'compression.token_treshold'"),
        ("compresion.keep_recent=1", "config.json has no 'compresion'"),
        ("compression=300", "is a section"),
        ("model.name=x", "model is a value, not a section"),
        ("compression.token_threshold=abc", "compression.token_threshold=abc"),
        ("compression.token_threshold=0", "greater than or equal to 1"),
        ("planner.strategy=fastest", "'plan_replan', 'next_step' or 'tool_loop'"),
        ("tools=[broken", "not valid JSON"),
        ("compression.keep_recent", "needs key=value"),
        ("=4", "needs key=value"),
    ],
    ids=[
        "misspelt-leaf",
        "misspelt-section",
        "a-section",
        "below-a-value",
        "not-a-number",
        "out-of-range",
        "not-a-choice",
        "broken-json",
        "no-value",
        "no-key",
    ],
)
def test_a_bad_parameter_is_a_usage_error_naming_it(option: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_sets([option])
    assert message in str(caught.value)
    with pytest.raises(UsageError):
        parse_grid([option])


def test_bad_grids_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="given twice"):
        parse_grid(["compression.keep_recent=1", "compression.keep_recent=2"])
    with pytest.raises(UsageError, match="needs a list of values"):
        grid_points(grid={"compression.keep_recent": "4"})
    with pytest.raises(UsageError, match="has no values"):
        grid_points(grid={"compression.keep_recent": []})
    with pytest.raises(UsageError, match="both set and swept"):
        grid_points({"compression.keep_recent": 1}, {"compression.keep_recent": [2, 3]})


def test_parameters_merge_over_the_scenario_config_over_the_agent_config() -> None:
    agent = {"model": "llama", "compression": {"max_messages": 12, "token_threshold": 900}}
    scenario = {"compression": {"max_messages": 6, "token_threshold": 300}}
    merged = apply_params(merge_config(agent, scenario), {"compression.token_threshold": 2000})
    assert merged == {"model": "llama", "compression": {"max_messages": 6, "token_threshold": 2000}}
    assert agent["compression"] == {"max_messages": 12, "token_threshold": 900}  # untouched


def test_importing_agentkit_eval_loads_no_dataframe_or_cluster_library() -> None:
    code = (
        "import json, sys; import agentkit.eval; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code])))
    assert not loaded & {"pandas", "pyarrow", "dask", "distributed", "tqdm", "yaml"}
