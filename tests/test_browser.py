"""The workbench in a real browser: JupyterLab on loopback, Debian's chromium driven by Playwright.

The test serves a temporary copy of notebooks 01 and 03 (parameterised with papermill's own
parameter injection) over a temporary data root, with the scripted model (``AGENTKIT_MODEL``),
opens each notebook in chromium, runs all its cells from the Run menu, then works the widgets as
a user would: types a message into the chat panel and clicks Send, waits for the streamed reply
and the plan table's new step, refreshes the conversation browser, edits and saves TaskState.
What it did is checked again on disk, and each dashboard is saved as a PNG in the test's temp
folder, or in ``$AGENTKIT_SCREENSHOT_DIR`` (``make test-browser`` sets ``docs/screenshots/``, the
README's pictures).

It skips, saying why, when /usr/bin/chromium is missing, unless ``AGENTKIT_REQUIRE_BROWSER`` is
set (CI sets it, so there it fails instead). Nothing is downloaded: Playwright drives the
system chromium through ``executable_path``. Waits are generous; no timing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from agentkit import Agent
from agentkit_desk import open_desk
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from tests._pictures import take_picture
from tests._processes import stop_group

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
JUPYTER = Path(sys.executable).with_name("jupyter")
WAIT_MS = 180_000  # generous: a loaded machine, a cold kernel
TOKEN = "agentkit-browser-test"

FIRST, FIRST_REPLY = "list my traders", "You have no traders yet."
SECOND, SECOND_REPLY = (
    "which exchange accounts do I have?",
    "No exchange account is connected yet; connect one to create a trader.",
)
API_KEY, SECRET_KEY = "AKEY-0123456789abcd", "SKEY-9876543210wxyz"
THIRD = f"connect binance as main: key {API_KEY} secret {SECRET_KEY}"
THIRD_REPLY = "Your binance account main is connected."
SCRIPT = {
    "plan": [
        {
            "goal": "list the traders",
            "steps": [
                {
                    "id": "s1",
                    "type": "tool",
                    "title": "List the traders",
                    "tool_name": "list_traders",
                },
                {"id": "s2", "type": "respond", "title": "Answer", "instruction": "Summarise."},
            ],
        },
        {
            "goal": "check the exchange accounts",
            "steps": [
                {
                    "id": "s1",
                    "type": "tool",
                    "title": "Check exchange accounts",
                    "tool_name": "get_exchange_configs",
                },
                {"id": "s2", "type": "respond", "title": "Report", "instruction": "Report."},
            ],
        },
        {
            "goal": "connect binance",
            "steps": [
                {
                    "id": "s1",
                    "type": "tool",
                    "title": "Connect the account",
                    "tool_name": "create_exchange_config",
                    "tool_args": {
                        "exchange": "binance",
                        "account_name": "main",
                        "api_key": API_KEY,
                        "secret_key": SECRET_KEY,
                    },
                },
                {"id": "s2", "type": "respond", "title": "Confirm", "instruction": "Confirm."},
            ],
        },
    ],
    "replan": [{"action": "continue"}],
    "respond": [FIRST_REPLY, SECOND_REPLY, THIRD_REPLY],
}


#: notebook 01 as the browser test runs it for a planner agent (the scripted model)
DESK_CHAT = {"agent_id": "desk-001", "message": FIRST, "follow_up": ""}
#: notebook 01 as shipped (innovator-001, its own two messages), on the embedded model
FIRST_CHAT = {"model": "llama"}
FIRST_CHAT_COPY = "01_chat_embedded.ipynb"


def source(notebook: str, parameters: dict[str, Any], model: str, test: str) -> dict[str, Any]:
    """Where a picture comes from (``docs/screenshots/pictures.json``): the notebook, the
    parameters given to it, the model it ran on and the test that takes it."""
    return {"notebook": notebook, "parameters": parameters, "model": model, "test": test}


WORKBENCH = (
    "tests/test_browser.py::test_the_workbench_in_jupyterlab_chat_plan_browser_and_task_state"
)
FIRST_CHAT_TEST = (
    "tests/test_browser.py::test_the_first_chat_notebook_as_shipped_on_the_embedded_model"
)
LABS = "tests/test_browser.py::test_the_compression_lab_and_the_prompt_lab_in_jupyterlab"
DESK = source("01_chat.ipynb", DESK_CHAT, "scripted", WORKBENCH)
TASK_STATE = {"agent_id": "desk-001"}
BRANCHES = {"agent_id": "desk-001"}
#: notebooks 04 and 06 as the test runs them (their scripted models' files are temp files)
COMPRESSION = {"n_values": [4], "t_values": [100], "k_values": [2, 6]}
PROMPTS = {"agent_id": "desk-001"}


SUMMARY = {
    "current_goal": "launch the project in Lisbon on March 14",
    "important_facts": ["launch in Lisbon", "budget 12,000 EUR", "Maria owns the database"],
}
REPLAYED_PLAN = {
    "goal": "show the traders",
    "steps": [{"id": "only", "type": "tool", "title": "List them", "tool_name": "list_traders"}],
}


def require_browser() -> None:
    """Skip (or, with AGENTKIT_REQUIRE_BROWSER set, fail) when the browser cannot run here."""
    problem = ""
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is not installed (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed (pip install -e '.[dev]')"
    if problem and os.environ.get("AGENTKIT_REQUIRE_BROWSER"):
        pytest.fail(f"AGENTKIT_REQUIRE_BROWSER is set but {problem}")
    if problem:
        pytest.skip(f"{problem}; set AGENTKIT_REQUIRE_BROWSER=1 to fail instead of skipping")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (and a check that it is a PNG at all)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


@dataclass
class Lab:
    base: str
    data_dir: Path
    log: Path

    def url(self, notebook: str, workspace: str) -> str:
        # A named workspace per notebook: the page opens that notebook alone.
        return f"{self.base}/lab/workspaces/{workspace}/tree/{notebook}?token={TOKEN}"


def write_parameterised(
    source: str, target: Path, parameters: dict[str, Any], *, name: str = ""
) -> None:
    """Notebook *source* with *parameters* injected, written to *target* (as *name*)."""
    notebook = parameterize_notebook(
        load_notebook_node(str(REPO / "notebooks" / source)),
        parameters,
        kernel_name="python3",
        language="python",
    )
    nbformat.write(notebook, str(target / (name or source)))


@pytest.fixture
def lab(tmp_path: Path, data_dir: Path) -> Iterator[Lab]:
    require_browser()
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    write_parameterised("01_chat.ipynb", notebooks, DESK_CHAT)
    # the tutorial's own run: notebook 01 as shipped, on the embedded model
    write_parameterised("01_chat.ipynb", notebooks, FIRST_CHAT, name=FIRST_CHAT_COPY)
    write_parameterised("03_task_state.ipynb", notebooks, TASK_STATE)
    summaries = tmp_path / "summarize.json"
    summaries.write_text(json.dumps({"summarize": [SUMMARY]}))
    write_parameterised(
        "04_compression_thresholds.ipynb",
        notebooks,
        {
            "model_spec": f"scripted:{summaries}",
            "scenario_dir": str(REPO / "data" / "scenarios" / "compression"),
            "n_values": [4],
            "t_values": [100],
            "k_values": [2, 6],
        },
    )
    replans = tmp_path / "replay.json"
    replans.write_text(json.dumps({"plan": [REPLAYED_PLAN]}))
    write_parameterised(
        "06_prompt_lab.ipynb",
        notebooks,
        {"agent_id": "desk-001", "model_spec": f"scripted:{replans}"},
    )
    write_parameterised("08_branches.ipynb", notebooks, BRANCHES)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})  # no news pop-up
    )
    env = {
        **os.environ,
        "JUPYTER_PLATFORM_DIRS": "1",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
        "AGENTKIT_DATA_DIR": str(data_dir),
        "AGENTKIT_MODEL": f"scripted:{script}",
        # the first-chat notebook runs on the embedded model by name; the others are scripted
        "AGENTKIT_ALLOW_MODEL_REQUESTS": "1",
    }
    port = free_port()
    log = tmp_path / "jupyterlab.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                str(JUPYTER),
                "lab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--allow-root",
                f"--ServerApp.token={TOKEN}",
                f"--ServerApp.root_dir={notebooks}",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(f"{base}/api/status?token={TOKEN}", process, log)
        yield Lab(base, data_dir, log)
    finally:
        stop_group(process)


def wait_for_server(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise AssertionError(f"JupyterLab exited ({process.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        process_wait(process, 0.5)
    raise AssertionError(f"JupyterLab never answered at {url}:\n{log.read_text()}")


def process_wait(process: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=seconds)


def screenshot_dir(default: Path) -> Path:
    """``$AGENTKIT_SCREENSHOT_DIR`` (``make test-browser`` sets docs/screenshots), else
    *default*: a plain test run leaves the committed screenshots alone."""
    target = Path(os.environ.get("AGENTKIT_SCREENSHOT_DIR") or default)
    target.mkdir(parents=True, exist_ok=True)
    return target


def run_all_cells(page: Any, url: str) -> None:
    """Open *url* (one notebook), wait for its kernel, then Run ▸ Run All Cells."""
    page.goto(url)
    page.locator(".jp-StatusBar-Item", has_text="| Idle").wait_for()
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()


def test_the_workbench_in_jupyterlab_chat_plan_browser_and_task_state(
    lab: Lab, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    shots = screenshot_dir(tmp_path / "screenshots")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.set_default_timeout(WAIT_MS)

            # 01: the notebook's own turn, then one typed into the panel
            run_all_cells(page, lab.url("01_chat.ipynb", "chat"))
            chat = page.locator(".agentkit-chat-panel")
            chat.locator(".agentkit-chat-transcript", has_text=FIRST_REPLY).wait_for()
            plan = chat.locator(".agentkit-plan-view")
            plan.locator(".agentkit-plan-table", has_text="List the traders").wait_for()
            chat.locator(".agentkit-chat-input textarea").fill(SECOND)
            chat.locator("button.agentkit-chat-send").click()
            chat.locator(".agentkit-chat-transcript", has_text=SECOND_REPLY).wait_for()
            plan.locator(".agentkit-plan-table", has_text="Check exchange accounts").wait_for()
            plan.locator(".agentkit-plan-table", has_text="get_exchange_configs").wait_for()
            chat.locator(".agentkit-chat-badge", has_text="scenario C").wait_for()
            assert chat.locator(".agentkit-chat-input textarea").input_value() == ""
            chat.get_by_text("Event log").click()  # unfold it
            log = chat.locator(".agentkit-chat-log")
            log.filter(has_text="step_complete: s1 done").wait_for()
            log.filter(has_text="result: completed").wait_for()
            take_picture(chat, shots, "chat_panel", DESK)

            # a change needs consent: the view shows it masked; Approve runs it
            chat.locator(".agentkit-chat-input textarea").fill(THIRD)
            chat.locator("button.agentkit-chat-send").click()
            approve = plan.locator("button.agentkit-plan-approve")
            approve.wait_for()
            plan.locator(".agentkit-plan-table", has_text="****abcd").wait_for()
            assert API_KEY not in plan.inner_text() and SECRET_KEY not in plan.inner_text()
            take_picture(plan, shots, "plan_view", DESK)
            approve.click()
            chat.locator(".agentkit-chat-transcript", has_text=THIRD_REPLY).wait_for()
            plan.locator(".agentkit-plan-table", has_text="ex-1").wait_for()  # the tool's result
            approve.wait_for(state="detached")

            browser_view = page.locator(".agentkit-conversation-browser")
            browser_view.scroll_into_view_if_needed()
            browser_view.locator("button", has_text="Refresh").click()
            messages = browser_view.locator("table.agentkit-browser-messages")
            messages.filter(has_text=THIRD_REPLY).wait_for()
            take_picture(browser_view, shots, "conversation_browser", DESK)

            # 03: the tour ends at version 4; a user edit in the form is version 5
            run_all_cells(page, lab.url("03_task_state.ipynb", "memory"))
            editor = page.locator(".agentkit-task-state-editor")
            editor.locator(".agentkit-task-notice", has_text="Reloaded version 4.").wait_for()
            goal = editor.locator(".agentkit-field-current_goal input")
            goal.fill("Typed in the browser")
            goal.press("Enter")  # the field syncs on Enter / blur (continuous_update=False)
            editor.locator(
                ".agentkit-task-diff", has_text="+current_goal: Typed in the browser"
            ).wait_for()
            editor.locator("button.agentkit-task-save").click()
            editor.locator(".agentkit-task-notice", has_text="Saved: version 5.").wait_for()
            take_picture(
                editor, shots, "task_state_editor",
                source("03_task_state.ipynb", TASK_STATE, "scripted", WORKBENCH),
            )  # fmt: skip
        finally:
            browser.close()

    # What the clicks did, read back from the data root.
    with Agent.open("desk-001", data_dir=lab.data_dir) as agent:
        conversations = {meta.title: meta.conversation_id for meta in agent.list_conversations()}
        chat_history = [m.content for m in agent.load_conversation_history(conversations[FIRST])]
        task_state = agent.task_state(conversations["TaskState tour"])
    assert chat_history[:4] == [FIRST, FIRST_REPLY, SECOND, SECOND_REPLY]
    # the keys the user typed are stored masked (the desk declares their formats)
    masked = THIRD.replace(API_KEY, "****abcd").replace(SECRET_KEY, "****wxyz")
    assert chat_history[4] == masked and chat_history[-2:] == ["yes", THIRD_REPLY]
    with open_desk(lab.data_dir / "agents" / "desk-001" / "workspace") as desk:
        assert [account.account_name for account in desk.exchange_configs()] == ["main"]
    assert task_state.version == 5
    assert task_state.value.current_goal == "Typed in the browser"
    for name in ("chat_panel", "plan_view", "conversation_browser", "task_state_editor"):
        width, height = png_size(shots / f"{name}.png")
        assert width > 300 and height > 100, (name, width, height)


def test_the_first_chat_notebook_as_shipped_on_the_embedded_model(lab: Lab, tmp_path: Path) -> None:
    """The tutorial's picture: notebook 01 as a user runs it (innovator-001, its own two
    messages) on the embedded model; the replies are the model's (masked in the check)."""
    from playwright.sync_api import expect, sync_playwright

    shots = screenshot_dir(tmp_path / "screenshots")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.set_default_timeout(WAIT_MS)
            run_all_cells(page, lab.url(FIRST_CHAT_COPY, "first"))
            chat = page.locator(".agentkit-chat-panel")
            # the second message found the live session: scenario B, two replies shown
            chat.locator(".agentkit-chat-badge", has_text="scenario B").wait_for()
            replies = chat.locator(".agentkit-transcript .agentkit-assistant")
            expect(chat.locator(".agentkit-streaming")).to_have_count(0, timeout=WAIT_MS)
            expect(replies).to_have_count(2, timeout=WAIT_MS)
            assert all(text.strip() != "assistant:" for text in replies.all_inner_texts())
            take_picture(
                chat, shots, "first_chat",
                source("01_chat.ipynb", FIRST_CHAT, "embedded", FIRST_CHAT_TEST),
                masks=(".agentkit-assistant",),
            )  # fmt: skip
        finally:
            browser.close()
    with Agent.open("innovator-001", data_dir=lab.data_dir) as agent:
        (meta,) = agent.list_conversations()
        history = agent.load_conversation_history(meta.conversation_id)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]


def test_the_compression_lab_and_the_prompt_lab_in_jupyterlab(lab: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = screenshot_dir(tmp_path / "screenshots")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 2600})
            page.set_default_timeout(WAIT_MS)

            # 04: the notebook sweeps K = 2, 6; the user widens it to 2, 4, 6 and runs again
            run_all_cells(page, lab.url("04_compression_thresholds.ipynb", "compression"))
            compression = page.locator(".agentkit-compression-lab")
            status = compression.locator(".agentkit-lab-status")
            status.filter(has_text="2 grid points").wait_for()
            k_values = compression.locator(".widget-text", has_text="K values").locator("input")
            k_values.fill("2, 4, 6")
            k_values.press("Enter")
            compression.locator("button", has_text="Run sweep").click()
            status.filter(has_text="3 grid points").wait_for()
            compression.locator("table", has_text="compressed").first.wait_for()
            compression.locator("img").first.wait_for()  # the plot
            take_picture(
                compression, shots, "compression_lab",
                source("04_compression_thresholds.ipynb", COMPRESSION, "scripted", LABS),
            )  # fmt: skip

            # 06: the recorded turn's calls; the edited template re-run from the browser
            run_all_cells(page, lab.url("06_prompt_lab.ipynb", "prompts"))
            prompts = page.locator(".agentkit-prompt-lab")
            prompts.locator(".agentkit-lab-status", has_text="replayed").wait_for()
            prompts.locator("table", has_text="List them").first.wait_for()  # the new plan
            prompts.locator("button", has_text="Re-run turn").click()
            prompts.locator(".agentkit-lab-status", has_text="replayed").wait_for()
            take_picture(
                prompts, shots, "prompt_lab",
                source("06_prompt_lab.ipynb", PROMPTS, "scripted", LABS),
            )  # fmt: skip

            # 08: a recorded conversation, its fork and replays as a tree; the user replays
            # the rest once more from the page and the comparison shows the new branch
            run_all_cells(page, lab.url("08_branches.ipynb", "branches"))
            branches = page.locator(".agentkit-branch-view")
            branches.locator(".agentkit-branch-tree", has_text="what if").wait_for()
            notice = branches.locator(".agentkit-lab-status")
            notice.filter(has_text="replayed").wait_for()
            before = notice.inner_text()
            keep = branches.locator(".widget-dropdown", has_text="Keep turns").locator("select")
            keep.select_option(index=2)  # keep turns 1-2 of the selected branch
            branches.locator("button", has_text="Replay the rest").click()
            expect(notice).not_to_have_text(before, timeout=WAIT_MS)
            expect(notice).to_contain_text("replayed", timeout=WAIT_MS)
            branches.locator(".agentkit-branch-comparison", has_text="same_answer").wait_for()
            take_picture(
                branches, shots, "branch_view",
                source("08_branches.ipynb", BRANCHES, "scripted", LABS),
            )  # fmt: skip
        finally:
            browser.close()
    for name in ("compression_lab", "prompt_lab", "branch_view"):
        width, height = png_size(shots / f"{name}.png")
        assert width > 300 and height > 100, (name, width, height)
