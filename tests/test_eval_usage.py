"""A run's usage is counted from its events only: every turn's ``result`` usage (each model call
of the turn) plus every ``compression`` event's (the memory upkeep after the result)."""

from __future__ import annotations

from pathlib import Path

from agentkit.eval import compare, load_scenarios, load_transcripts, run_eval
from agentkit.events import CompressionEvent, ResultEvent

from .test_eval_runs import SCENARIOS, row, scenario


def test_every_model_call_of_a_run_is_counted_from_its_events(data_dir: Path) -> None:
    frame = run_eval(
        [scenario("desk_create_trader_en"), scenario("desk_sim_create_trader_en")],
        model="scripted",
        data_dir=data_dir,
        progress=False,
    )
    # plan, 3 replans, respond — with fixed turns and with a (scripted) simulated user
    assert row(frame, "desk_create_trader_en")["model_calls"] == 5
    assert row(frame, "desk_sim_create_trader_en")["model_calls"] == 5
    # whatever the events say is what the row says (no count of its own)
    for record, transcript in zip(frame.to_dict("records"), load_transcripts(frame), strict=True):
        assert transcript is not None
        events = transcript.events()
        reported = [e.usage for e in events if isinstance(e, ResultEvent | CompressionEvent)]
        assert record["input_tokens"] == sum(u.input_tokens for u in reported) > 0
        assert record["output_tokens"] == sum(u.output_tokens for u in reported) > 0
        assert record["model_calls"] == sum(u.calls for u in reported)


def test_compression_after_the_result_is_counted_in_tokens_and_calls(data_dir: Path) -> None:
    chosen = load_scenarios(SCENARIOS, tags=["compression"])
    low, high = (
        run_eval(
            chosen,
            model="scripted",
            sets={"compression.token_threshold": threshold},
            data_dir=data_dir,
            progress=False,
        )
        for threshold in (300, 2000)
    )
    assert (low["compressions"] == 1).all() and (high["compressions"] == 0).all()
    # the summary is one more model call, and its tokens are the run's too
    assert (low["model_calls"] == high["model_calls"] + 1).all()
    assert (low["input_tokens"] > high["input_tokens"]).all()
    assert (low["output_tokens"] > high["output_tokens"]).all()
    text = compare(high, low).report()
    assert "tokens       mean +0.000" not in text
    assert "model_calls  mean +1.000" in text
