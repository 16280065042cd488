"""The CLI reference page is the CLI's own description; ``agentkit send`` says how to continue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentkit.cli import reference

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_cli_reference_page_is_what_the_cli_generates() -> None:
    page = (ROOT / reference.PAGE).read_text(encoding="utf-8")
    diff = reference.check(page)
    assert diff == [], (
        "docs/reference/cli.md is stale: run `python -m agentkit.cli.reference --write`\n"
        + "\n".join(diff[:60])
    )


def _option(command: Any, flag: str) -> Any:
    ctx = command.context_class(command, info_name="x")
    return next(p for p in command.get_params(ctx) if flag in getattr(p, "opts", ()))


def test_a_renamed_flag_makes_the_reference_check_fail() -> None:
    """A fresh command tree (typer builds new click objects per call, so the real CLI is not
    touched) with ``send --model`` renamed: the check reports exactly that line."""
    page = (ROOT / reference.PAGE).read_text(encoding="utf-8")
    renamed = reference.root_command()
    ctx = renamed.context_class(renamed, info_name="agentkit")
    send = renamed.get_command(ctx, "send")
    option = _option(send, "--model")
    option.opts = ["--model-spec"]
    diff = reference.check(page, renamed)
    changed = [line for line in diff if line[:1] in "+-" and line[:3] not in {"+++", "---"}]
    assert len(changed) == 2, diff
    added, removed = sorted(changed)  # '+' sorts before '-'
    assert added.startswith("+| `--model-spec` | text |"), added
    assert removed.startswith("-| `--model` | text |"), removed
    assert reference.check(page) == []  # the real CLI was not touched


def test_the_check_command_exits_1_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / reference.PAGE
    page.parent.mkdir(parents=True)
    page.write_text(reference.render().replace("`--json`", "`--as-json`", 1))
    assert reference.main(["--check", "--root", str(tmp_path)]) == 1
    assert reference.main(["--write", "--root", str(tmp_path)]) == 0
    assert reference.main(["--check", "--root", str(tmp_path)]) == 0


def test_send_prints_the_reply_on_stdout_and_the_conversation_id_on_stderr(
    data_dir: Path, tmp_path: Path
) -> None:
    script, again = tmp_path / "script.json", tmp_path / "again.json"
    script.write_text(json.dumps({"chat": ["Hello from the script."]}))
    again.write_text(json.dumps({"chat": ["Again."]}))
    model = f"scripted:{script}"
    first = run_cli("--data-dir", str(data_dir), "send", "innovator-001", "--model", model, "hi")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "Hello from the script.\n"
    [line] = first.stderr.splitlines()
    conversation = line.split()[1]
    assert line == (
        f"conversation: {conversation} "
        f"(continue it: agentkit send innovator-001 -c {conversation} MESSAGE)"
    )
    # the hint is the next command: the second message continues that conversation
    second = run_cli(
        "--data-dir", str(data_dir), "send", "innovator-001", "-c", conversation,
        "--model", f"scripted:{again}", "--json", "again",
    )  # fmt: skip
    assert second.exit_code == 0, second.stderr
    events = [json.loads(event) for event in second.stdout.splitlines()]
    assert events[0]["conversationId"] == conversation and events[0]["scenario"] == "C"
    assert events[-1]["text"] == "Again."
    assert second.stderr.splitlines() == [line]
