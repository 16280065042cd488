"""Compression sweeps: fact retention, scenario files, grids, the sweep and the lab's widgets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentkit import (
    Agent,
    ConfigError,
    ConversationNotFoundError,
    Message,
    ScriptedModel,
    TaskState,
    UsageError,
)
from agentkit.memory import build_summarize_messages
from agentkit.memory.fidelity import fact_location, fact_retention, facts_in_messages
from agentkit.memory.sweep import (
    CompressionScenario,
    ThresholdGrid,
    load_scenario,
    sweep_compression,
)
from agentkit.memory.tokens import estimate_messages, estimate_tokens
from agentkit.store import ConversationKey
from agentkit.store.records import CompressionRecord, ResetRecord
from agentkit.types import utc_now
from lab import CompressionLab
from lab.compression_lab import strategy_frame
from lab.sweep_view import (
    conversation_source,
    parse_grid,
    parse_values,
    scenario_source,
    sweep_frame,
)

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios" / "compression"
EN = SCENARIOS / "project_planning_en.json"

SUMMARY = {
    "current_goal": "launch the booking app on March 14 in Lisbon",
    "open_loops": ["the week-by-week timeline is still to be drafted"],
    "important_facts": ["launch budget 12,000 EUR", "the stack stays on Postgres"],
}


def run(coroutine):  # a tiny helper: the sweep is async, the tests are not
    import asyncio

    return asyncio.run(coroutine)


def summarize_requests(model: ScriptedModel) -> list:
    return [request for request in model.requests if request.purpose == "summarize"]


# -- fact retention ---------------------------------------------------------------------------


def test_a_fact_is_found_case_insensitively_in_each_durable_field() -> None:
    state = TaskState(
        current_goal="Launch on  March 14",
        open_loops=("finish the Postgres migration",),
        important_facts=("The user trades on OKX",),
        pinned_facts=("只做现货，不开合约",),
    )
    retention = fact_retention(
        state, ["okx", "MARCH 14", "postgres migration", "只做现货", "Lisbon"]
    )
    assert retention.kept == ("okx", "MARCH 14", "postgres migration", "只做现货")
    assert retention.lost == ("Lisbon",)
    assert dict(retention.where) == {
        "okx": "important_facts",
        "MARCH 14": "current_goal",  # runs of whitespace count as one space
        "postgres migration": "open_loops",
        "只做现货": "pinned_facts",
    }
    assert retention.ratio == pytest.approx(0.8)
    assert fact_location(state, "active flow") is None
    assert fact_retention(state, []).ratio is None


def test_an_empty_fact_is_refused_because_it_would_match_anything() -> None:
    with pytest.raises(UsageError, match="fact 1 is empty"):
        fact_retention(TaskState(current_goal="x"), ["x", "  "])


def test_facts_in_messages_reads_the_window_text() -> None:
    window = [Message.user("We launch in Lisbon"), Message.user("budget: 12,000 eur")]
    assert facts_in_messages(window, ["lisbon", "12,000 EUR", "Postgres"]) == (
        "lisbon",
        "12,000 EUR",
    )


# -- scenario files ---------------------------------------------------------------------------


def test_the_shipped_scenarios_validate_and_their_facts_are_in_their_dialogues() -> None:
    files = sorted(SCENARIOS.glob("*.json"))
    languages = set()
    for path in files:
        scenario = load_scenario(path)
        languages.add(scenario.language)
        window = scenario.window()
        assert len(window) == len(scenario.messages) >= 12
        assert scenario.facts and facts_in_messages(window, scenario.facts) == scenario.facts
        assert scenario.task_state().pinned_facts == scenario.pinned_facts
        # an assistant reply joins the turn of the user message before it
        assert window[1].role == "assistant" and window[1].message_id == window[0].message_id
    assert languages == {"zh", "en"}


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("data", "field", "problem"),
    [
        (
            {"facts": ["a"], "messages": [{"role": "user", "content": "hi"}] * 3
             + [{"role": "robot", "content": "beep"}]},
            "messages.3.role",
            "Input should be 'user', 'assistant' or 'tool'",
        ),
        ({"facts": ["a"]}, "messages", "Field required"),
        ({"messages": [], "facts": []}, "messages", "at least 1 item"),
        (
            {"fact": ["a"], "messages": [{"role": "user", "content": "hi"}]},
            "fact",
            "unknown key",
        ),
        (
            {"facts": ["ok", " "], "messages": [{"role": "user", "content": "hi"}]},
            "facts.1",
            "at least 1 character",
        ),
        ([{"role": "user", "content": "hi"}], "", "valid dictionary"),
    ],
)  # fmt: skip
def test_a_bad_scenario_file_is_an_error_naming_the_field(
    tmp_path: Path, data: object, field: str, problem: str
) -> None:
    path = write(tmp_path / "bad.json", data)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert caught.value.field == field
    assert problem in caught.value.problem
    assert str(path) in str(caught.value)


def test_a_scenario_that_is_not_json_or_missing_is_a_config_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"messages": [', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"not valid JSON \(line 1"):
        load_scenario(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario(tmp_path / "absent.json")


# -- grids ------------------------------------------------------------------------------------


def test_a_grid_runs_the_product_in_order_without_duplicates() -> None:
    grid = ThresholdGrid([4, 8, 4], [100], [2, 6])
    assert grid.max_messages == (4, 8) and grid.size == 4
    assert [(c.max_messages, c.token_threshold, c.keep_recent) for c in grid.configs()] == [
        (4, 100, 2),
        (4, 100, 6),
        (8, 100, 2),
        (8, 100, 6),
    ]


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        (([], [100], [2]), "max_messages \\(N\\) has no values"),
        (([4], [], [2]), "token_threshold \\(T\\) has no values"),
        (([4], [100], []), "keep_recent \\(K\\) has no values"),
        (([0], [100], [2]), "integers >= 1: 0"),
        (([4], [100], [-1]), "integers >= 0: -1"),
    ],
)
def test_an_empty_or_out_of_range_grid_is_refused(axes: tuple, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ThresholdGrid(*axes)


def test_typed_grid_values_are_parsed_and_bad_items_named() -> None:
    assert parse_values(" 4, 8;12  16 ", "N") == (4, 8, 12, 16)
    with pytest.raises(UsageError, match="T: '1e3' is not a whole number"):
        parse_values("100, 1e3", "T")
    with pytest.raises(UsageError, match="keep_recent \\(K\\) has no values"):
        parse_grid("4", "100", " , ")


# -- the sweep --------------------------------------------------------------------------------


def test_the_sweep_compresses_over_both_thresholds_and_counts_what_survives() -> None:
    scenario = load_scenario(EN)
    window = scenario.window()
    model = ScriptedModel({"summarize": [SUMMARY]})
    rows = run(
        sweep_compression(
            window,
            scenario.task_state(),
            model,
            ThresholdGrid([4, 30], [10, 100_000], [2]),
            facts=scenario.facts,
            estimate=estimate_tokens,
        )
    )
    assert [(r.max_messages, r.token_threshold, r.status) for r in rows] == [
        (4, 10, "compressed"),
        (4, 100_000, "under_threshold"),  # over N, under T
        (30, 10, "under_threshold"),  # over T, under N
        (30, 100_000, "under_threshold"),
    ]
    done = rows[0]
    assert done.messages_before == 18 and done.messages_after == 2
    assert done.tokens_before == estimate_messages(window, estimate_tokens)
    assert done.tokens_after == estimate_messages(window[-2:], estimate_tokens)
    # the summary names March 14, Lisbon, 12,000 EUR and Postgres; Maria and the weekend rule
    # were in the summarised part and are gone
    assert done.facts_in_state == 4 and done.facts_in_context == 4
    assert set(done.lost_facts) == {"Maria", "no weekend work"}
    assert done.task_state.pinned_facts == ("The user's name is Sam",)  # carried over
    for untouched in rows[1:]:
        assert untouched.tokens_after == untouched.tokens_before
        assert untouched.facts_in_context == 6 and untouched.lost_facts == ()
    # the model was sent exactly what a planner turn would send for that cut
    (request,) = summarize_requests(model)
    assert list(request.messages) == build_summarize_messages(window[:-2], scenario.task_state())


def test_points_with_the_same_cut_share_one_summary() -> None:
    scenario = load_scenario(EN)
    model = ScriptedModel({"summarize": [SUMMARY]})
    progress: list[tuple[int, int]] = []
    rows = run(
        sweep_compression(
            scenario.window(),
            scenario.task_state(),
            model,
            ThresholdGrid([4, 6, 8], [10], [2, 4]),
            facts=scenario.facts,
            progress=lambda done, total: progress.append((done, total)),
        )
    )
    assert [r.status for r in rows] == ["compressed"] * 6
    assert [r.reused for r in rows] == [False, False, True, True, True, True]
    assert len(summarize_requests(model)) == 2  # one per distinct K
    assert progress == [(i, 6) for i in range(1, 7)]


def test_a_malformed_summary_is_a_failed_row_and_the_sweep_goes_on() -> None:
    scenario = load_scenario(EN)
    start = scenario.task_state()
    model = ScriptedModel(
        {"summarize": ['{"current_goal": "x", "important_facts": "oops"', SUMMARY]}
    )
    rows = run(
        sweep_compression(
            scenario.window(),
            start,
            model,
            ThresholdGrid([4], [10], [2, 6, 40]),
            facts=scenario.facts,
        )
    )
    failed, compressed, nothing = rows
    assert failed.status == "failed" and "structured output did not validate" in failed.error
    assert failed.messages_after == failed.messages_before  # nothing changed
    assert failed.facts_in_context == 6 and failed.task_state is start
    assert compressed.status == "compressed" and compressed.facts_in_state == 4
    assert compressed.keep_recent == 6 and compressed.messages_after == 6
    assert nothing.status == "nothing_to_cut"  # K=40 keeps everything: no model call
    assert len(summarize_requests(model)) == 2


def test_a_schema_valid_summary_of_the_wrong_shape_is_a_failed_row() -> None:
    scenario = load_scenario(EN)
    model = ScriptedModel({"summarize": [{"important_facts": "not a list"}]})
    (row,) = run(
        sweep_compression(scenario.window(), TaskState(), model, ThresholdGrid([4], [10], [2]))
    )
    assert row.status == "failed" and "important_facts" in row.error


def test_the_cut_never_separates_a_tool_call_from_its_result() -> None:
    scenario = CompressionScenario.model_validate(
        {
            "messages": [
                {"role": "user", "content": "list my traders please"},
                {"role": "assistant", "content": "calling list_traders"},
                {"role": "tool", "content": '{"traders": ["alpha"]}'},
                {"role": "tool", "content": '{"traders": ["beta"]}'},
                {"role": "assistant", "content": "you have alpha and beta"},
                {"role": "user", "content": "thanks"},
            ],
            "facts": ["alpha"],
        }
    )
    # only the first message is summarised: a fact from it is grounded
    model = ScriptedModel({"summarize": [{"important_facts": ["list the traders"]}]})
    (row,) = run(
        sweep_compression(
            scenario.window(), TaskState(), model, ThresholdGrid([2], [1], [3]), facts=["traders"]
        )
    )
    # keeping 3 would start the window with a tool result: the whole call group is kept instead
    assert row.status == "compressed" and row.messages_after == 5
    assert row.facts_in_state == 1


def test_an_empty_fact_stops_the_sweep_before_any_model_call() -> None:
    model = ScriptedModel({"summarize": [SUMMARY]})
    with pytest.raises(UsageError, match="fact 0 is empty"):
        run(
            sweep_compression(
                load_scenario(EN).window(), TaskState(), model, ThresholdGrid([4], [10], [2]),
                facts=[""],
            )
        )  # fmt: skip
    assert model.requests == []


def test_the_frame_has_one_row_per_point_and_retention_ratios() -> None:
    scenario = load_scenario(EN)
    rows = run(
        sweep_compression(
            scenario.window(),
            scenario.task_state(),
            ScriptedModel({"summarize": [SUMMARY]}),
            ThresholdGrid([4], [10, 100_000], [2]),
            facts=scenario.facts,
        )
    )
    frame = sweep_frame(rows)
    assert list(frame["status"]) == ["compressed", "under_threshold"]
    assert list(frame["state_retention"]) == pytest.approx([4 / 6, 0.0])
    assert list(frame["context_retention"]) == pytest.approx([4 / 6, 1.0])
    assert frame.loc[0, "lost_facts"] == "Maria; no weekend work"


# -- the lab ----------------------------------------------------------------------------------


def test_the_lab_runs_a_scenario_sweep_on_click(tmp_path: Path) -> None:
    model = ScriptedModel({"summarize": [SUMMARY]})
    lab = CompressionLab(scenarios_dir=SCENARIOS, scenario=EN, model=model)
    try:
        assert lab.facts.value.splitlines() == list(load_scenario(EN).facts)
        lab.n_values.value, lab.t_values.value, lab.k_values.value = "4, 30", "10", "2, 6"
        lab.run_button.click()
        assert "color:#b00020" not in lab.status.value, lab.status.value
        assert list(lab.frame["status"]) == ["compressed"] * 2 + ["under_threshold"] * 2
        assert lab.progress.value == lab.progress.max == 4
        assert bytes(lab.plot.value).startswith(b"\x89PNG")
        assert "under_threshold" in lab.table.value and "Maria" in lab.table.value
        assert "4 grid points, 2 summarize calls" in lab.status.value
        assert len(summarize_requests(model)) == 2
    finally:
        lab.close()


def test_the_lab_shows_a_bad_scenario_and_an_empty_grid_without_running(tmp_path: Path) -> None:
    write(tmp_path / "a_good.json", json.loads(EN.read_text(encoding="utf-8")))
    bad = {"facts": ["x"], "messages": [{"role": "user", "content": "hi"}, {"role": "bot"}]}
    write(tmp_path / "b_bad.json", bad)
    model = ScriptedModel({"summarize": [SUMMARY]})
    lab = CompressionLab(scenarios_dir=tmp_path, model=model)
    try:
        assert [name for name, _ in lab.scenario.options] == ["a_good.json", "b_bad.json"]
        lab.scenario.value = str(tmp_path / "b_bad.json")
        assert "messages.1.role" in lab.status.value
        lab.run_button.click()
        assert "messages.1.role" in lab.status.value and lab.frame.empty
        lab.scenario.value = str(tmp_path / "a_good.json")
        lab.k_values.value = ""
        lab.run_button.click()
        assert "keep_recent (K) has no values" in lab.status.value
        assert lab.frame.empty and model.requests == []
        assert not lab.run_button.disabled  # usable again after an error
    finally:
        lab.close()


def test_the_lab_reports_a_failed_summary_in_its_status() -> None:
    model = ScriptedModel({"summarize": ["I am not JSON at all"]})
    lab = CompressionLab(scenarios_dir=SCENARIOS, scenario=EN, model=model)
    try:
        lab.n_values.value, lab.t_values.value, lab.k_values.value = "4", "10", "2"
        lab.run_button.click()
        assert list(lab.frame["status"]) == ["failed"]
        assert "1 failed" in lab.status.value and "not JSON" in lab.table.value
    finally:
        lab.close()


def test_the_lab_sweeps_a_stored_conversation_from_its_pinned_facts(data_dir: Path) -> None:
    scenario = load_scenario(EN)
    model = ScriptedModel({"summarize": [SUMMARY]})
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        cid = agent.create_conversation("launch planning").conversation_id
        for message in scenario.window():
            agent.append_message(cid, message)
        agent.runtime.store.add_record(  # an earlier compression kept the last 14
            ConversationKey(agent.id, cid),
            CompressionRecord(message_id=message.message_id, at=message.timestamp, start=4,
                              summarised=4, kept=14),
        )  # fmt: skip
        stored = agent.task_state(cid)
        agent.save_task_state(
            cid,
            TaskState(current_goal="an older summary", pinned_facts=("Sam runs marketing",)),
            expected_version=stored.version,
        )
        lab = CompressionLab(agent, cid, facts=["Lisbon", "Sam", "Maria"], scenarios_dir=None)
        try:
            assert lab.source_kind.value == "conversation" and lab.conversation.value == cid
            lab.n_values.value, lab.t_values.value, lab.k_values.value = "4", "10", "2"
            lab.run_button.click()
            assert "color:#b00020" not in lab.status.value, lab.status.value
            (row,) = lab.rows
            assert row.messages_before == 18  # the whole dialogue, not only what was kept
            assert row.task_state.pinned_facts == ("Sam runs marketing",)
            assert row.facts_in_state == 2 and row.lost_facts == ("Maria",)
            (request,) = summarize_requests(model)
            sent = request.messages[-1].content
            assert "an older summary" not in sent  # starts from the pinned facts only
            assert "[compressed:" not in sent and "Hi, I need help planning" in sent
            # the lab's model field defaulted to the agent's configured model
            assert lab.model.value == "scripted:inline"
        finally:
            lab.close()


def test_a_conversation_source_starts_after_the_last_clear(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel({})) as agent:
        cid = agent.create_conversation("cleared").conversation_id
        for text in ("forgotten question", "/clear", "kept question"):
            question = Message.user(text)
            agent.append_message(cid, question)
            agent.append_message(
                cid, Message.assistant(f"reply to {text}", message_id=question.message_id)
            )
            if text == "/clear":  # what a /clear turn leaves: the window starts after it
                reset = ResetRecord(message_id=question.message_id, at=utc_now(), start=4)
                agent.store.add_record(ConversationKey(agent.id, cid), reset)
        source = conversation_source(agent, cid, ["kept"])
        assert [m.content for m in source.window] == ["kept question", "reply to kept question"]
        with pytest.raises(ConversationNotFoundError):
            CompressionLab(agent, "conv-doesnotexist", scenarios_dir=None)


def test_a_session_backend_spec_is_refused_as_a_sweep_model() -> None:
    lab = CompressionLab(scenarios_dir=SCENARIOS, scenario=EN, model="acp:some-agent --stdio")
    try:
        lab.n_values.value, lab.t_values.value, lab.k_values.value = "4", "10", "2"
        lab.run_button.click()
        assert "needs a chat model" in lab.status.value and lab.frame.empty
    finally:
        lab.close()


def test_a_scenario_source_keeps_the_scenario_label_and_facts() -> None:
    source = scenario_source(EN)
    assert source.label.startswith("Planning a product launch")
    assert source.facts == load_scenario(EN).facts and len(source.window) == 18


def test_the_lab_sweeps_strategies_and_plots_what_each_keeps() -> None:
    model = ScriptedModel({"summarize": [{"important_facts": ["Lisbon", "lives in Berlin"]}]})
    lab = CompressionLab(scenarios_dir=SCENARIOS, scenario=EN, model=model)
    try:
        assert lab.strategies.value == "model"
        lab.n_values.value, lab.t_values.value, lab.k_values.value = "4", "10", "2"
        lab.strategies.value = "model, extractive, hybrid"
        lab.run_button.click()
        assert list(lab.frame["strategy"]) == ["model", "extractive", "hybrid"]
        assert list(lab.frame["facts_ungrounded"]) == [1, 0, 1]
        assert len(summarize_requests(model)) == 2  # extractive asks no model
        assert bytes(lab.strategy_plot.value).startswith(b"\x89PNG")
        table = strategy_frame(lab.rows)
        assert list(table["strategy"]) == ["model", "extractive", "hybrid"]
        assert list(table["facts_kept"]) == [1, 6, 6]
        assert list(table["facts_lost"]) == [5, 0, 0]
        assert table["summary_ms"].notna().all()
        lab.strategies.value = "model, magic"
        lab.run_button.click()
        assert "magic" in lab.status.value and "is not one of" in lab.status.value
    finally:
        lab.close()
