"""schemathesis against the live API's own /openapi.json: no 5xx, and every response conforms.

A bounded, seeded run is part of the normal suite. ``make fuzz`` runs the same test with a
time budget ($AGENTKIT_FUZZ_SECONDS) and no seed, and prints the counts. The server is a real
uvicorn with a bearer token (the fuzzer sends it) and the scripted model, so chat turns run
end to end; the schemathesis CLI runs as a subprocess and writes its JSON report.

Chat messages are also drawn from a dictionary of strings where Python's ``str.strip()`` and
ECMA's ``\\s`` disagree, so the run checks that the published schema says what the server
accepts: a body valid by the schema must never get a 422 (``positive_data_acceptance``), an
invalid one must (``negative_data_rejection``). The same strings are checked one by one below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
import jsonschema_rs
import schemathesis
from agentkit import ScriptedModel
from agentkit.agent import MAX_MESSAGE_LENGTH
from agentkit.api import create_app
from agentkit.api.openapi import CHAT_PATH
from agentkit.api.schemas import NON_BLANK_REGEX, is_blank
from fastapi import FastAPI
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.jsonschema import FANCY_REGEX_OPTIONS
from schemathesis.core.jsonschema.patterns import compile_ecma_pattern
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.converter import update_pattern_in_schema

from tests.fakes.live_api import live_server

TOKEN = "fuzz-token-0123456789"
SCRIPT: dict[str, list[Any]] = {
    "chat": ["Hello from the script"],
    "plan": [
        {"goal": "answer", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]},
    ],
    "replan": [{"action": "finish", "reason": "done"}],
    "respond": ["Done."],
    "reason": ["Reasoned."],
    "summarize": [{}],
    "classify": ["other"],
}
AUTH = {"Authorization": f"Bearer {TOKEN}"}

#: Chat messages where str.strip() and ECMA's \s disagree: (message, the mode the published
#: schema gives a body with it, the status the server answers). The server's rule is strip().
CHAT_MESSAGES = [
    ("\u001e", GenerationMode.NEGATIVE, 422),  # stripped, though not ECMA whitespace
    ("   ", GenerationMode.NEGATIVE, 422),
    ("\u001e\u0085\u3000\n", GenerationMode.NEGATIVE, 422),
    ("\u001ex", GenerationMode.POSITIVE, 200),  # issue 40's held-out finding
    ("x\u001e", GenerationMode.POSITIVE, 200),
    ("\u001e x \u001e\n", GenerationMode.POSITIVE, 200),
    ("\ufeff", GenerationMode.POSITIVE, 200),  # ECMA whitespace, though not stripped
]
#: the schemathesis.toml of the CLI run: the same messages, in half the generated chat bodies
CONFIG = """
[dictionaries.chat-messages]
values = [{values}]

[parameters]
"body.message" = {{ dictionary = "chat-messages", probability = 0.5 }}
""".format(values=", ".join(json.dumps(message) for message, _, _ in CHAT_MESSAGES))


def build_server(data_dir: Path) -> Callable[[int], FastAPI]:
    def build(port: int) -> FastAPI:
        return create_app(data_dir, model=ScriptedModel(SCRIPT), token=TOKEN, port=port)

    return build


def test_schemathesis_finds_no_server_error_and_no_conformance_failure(
    data_dir: Path, tmp_path: Path
) -> None:
    seconds = os.environ.get("AGENTKIT_FUZZ_SECONDS")
    budget = ["--max-time", seconds] if seconds else ["--max-examples", "4", "--seed", "1"]
    report = tmp_path / "schemathesis.json"
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)

    with live_server(build_server(data_dir)) as base:
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "--config-file",
                str(config),
                "run",
                f"{base}/openapi.json",
                "--header",
                f"Authorization: Bearer {TOKEN}",
                "--checks",
                "all",
                "--workers",
                "1",
                "--report",
                "json",
                "--report-json-path",
                str(report),
                *budget,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
    assert report.is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(report.read_text())
    cases = summary["test_cases"]
    print(
        f"schemathesis: {summary['operations']['tested']} operations, "
        f"{cases['generated']} test cases, {cases['with_failures']} with failures, "
        f"{len(summary['failures'])} unique failures, {len(summary['errors'])} errors, "
        f"{summary['running_time']:.1f}s"
    )
    # 10 + the turn events route + listing and deciding approvals
    assert summary["operations"]["tested"] == summary["operations"]["total"] == 13
    assert cases["generated"] > 100
    assert summary["failures"] == [] and summary["errors"] == [], run.stdout[-6000:]
    assert run.returncode == 0, run.stdout[-6000:]
    conversations = data_dir / "agents" / "innovator-001" / "conversations"
    assert any(conversations.iterdir())  # the fuzzer really reached the chat and create routes
    # nothing blank was stored (the dictionary's blank messages were refused). Whether a draw of
    # this short run took a dictionary message is chance; the cases on both sides of the rule
    # are sent one by one in the next test, and read in every dialect in the last one
    sent = {
        message["content"]
        for path in conversations.glob("*/history.json")
        for message in json.loads(path.read_text())
        if message["role"] == "user"
    }
    assert sent and not any(is_blank(message) for message in sent), sent


def test_schemathesis_judges_each_chat_message_as_the_server_does(data_dir: Path) -> None:
    checks = [
        not_a_server_error,
        positive_data_acceptance,  # valid by the schema: never a 422
        negative_data_rejection,  # invalid by the schema: a 4xx
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    # a generated case per message (a case is sent once), its body then replaced; any case
    # will do, so no shrinking
    settings = hypothesis.settings(database=None, phases=[hypothesis.Phase.generate])
    with live_server(build_server(data_dir)) as base:
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json", headers=AUTH)
        strategy = schema[CHAT_PATH]["POST"].as_strategy()
        count = len(CHAT_MESSAGES)
        cases = hypothesis.find(
            st.lists(strategy, min_size=count, max_size=count), lambda _: True, settings=settings
        )
        for case, (message, mode, status) in zip(cases, CHAT_MESSAGES, strict=True):
            case.path_parameters = {"agentId": "innovator-001"}
            case.body = {"message": message}  # schemathesis revalidates the edited case
            response = case.call_and_validate(headers=AUTH, checks=checks)
            assert case.meta is not None and case.meta.generation.mode == mode, message
            assert response.status_code == status, (message, response.text)


def test_the_message_pattern_reads_the_same_in_schemathesis_regex_dialects() -> None:
    """The validator's (ECMA-262, in Rust) and the generator's (Python ``re``) reading of the
    pattern both refuse exactly the characters ``str.strip()`` removes."""
    stripped = [i for i in range(sys.maxunicode + 1) if chr(i).isspace()]
    everything = [i for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]
    schema = {"type": "string", "pattern": NON_BLANK_REGEX}
    validator = jsonschema_rs.validator_for(schema, pattern_options=FANCY_REGEX_OPTIONS)
    assert [i for i in everything if not validator.is_valid(chr(i))] == stripped
    generator = compile_ecma_pattern(NON_BLANK_REGEX)
    assert generator is not None
    assert [i for i in everything if not generator.search(chr(i))] == stripped


def test_the_message_schema_keeps_its_meaning_when_schemathesis_folds_in_the_lengths() -> None:
    """Issue 40: schemathesis rewrites a pattern with ``minLength``/``maxLength`` into one
    quantified pattern before generating; an unanchored ``[^…]`` became ``^[^…]{1,N}$`` and
    ``"\\u001ex"`` was generated as invalid although the server accepts it. The published
    pattern means the same searched, full-matched and rewritten, on both sides of the rule."""
    schema: dict[str, Any] = {
        "type": "string",
        "pattern": NON_BLANK_REGEX,
        "minLength": 1,
        "maxLength": MAX_MESSAGE_LENGTH,
    }
    rewritten = dict(schema)
    update_pattern_in_schema(rewritten)
    readings = {
        "searched (ECMA, Rust)": jsonschema_rs.validator_for(
            schema, pattern_options=FANCY_REGEX_OPTIONS
        ).is_valid,
        "rewritten (ECMA, Rust)": jsonschema_rs.validator_for(
            rewritten, pattern_options=FANCY_REGEX_OPTIONS
        ).is_valid,
    }
    generator = compile_ecma_pattern(rewritten["pattern"])
    assert generator is not None
    readings["rewritten (Python re, full match)"] = lambda value: bool(generator.fullmatch(value))
    samples = [message for message, _, _ in CHAT_MESSAGES] + [
        "x",
        "\u001ex\u001e",
        "\u2028\u2029",
        "a\nb",
        "\n\n",
        "\u00a0hello",
    ]
    for message in samples:
        for name, valid in readings.items():
            assert valid(message) is not is_blank(message), (name, message)
    for message, mode, _ in CHAT_MESSAGES:
        assert (mode == GenerationMode.POSITIVE) is not is_blank(message), message
