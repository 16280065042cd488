"""Every picture in the README and the docs is the one its source gave, and says its source.

The browser tests photograph each picture from its notebook, page or command and compare what
it shows with ``docs/screenshots/pictures.json`` (tests/_pictures.py): a stale picture fails
there. This file checks the rest without a browser: each picture a page shows has a manifest
entry, the committed PNG is the one the manifest was written with (a picture replaced by hand,
or refreshed without its manifest, fails), the page names the picture's source beside it, and
the comparison itself fails on a picture whose text changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import _pictures
from tests._pictures import MANIFEST, PICTURES, REPO, load_manifest, normalise, png_sha256

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
#: how many lines either side of a picture its caption may be
NEAR = 12


def shown() -> list[tuple[Path, int, str]]:
    """(page, line index, picture name) for every screenshot a page shows."""
    found = []
    for page in PAGES:
        for index, line in enumerate(page.read_text(encoding="utf-8").splitlines()):
            for target in IMAGE.findall(line):
                path = (page.parent / target).resolve()
                if path.parent == PICTURES.resolve():
                    found.append((page, index, path.stem))
    return found


def test_the_pages_show_pictures_at_all() -> None:
    names = {name for _, _, name in shown()}
    assert {"plan_view", "first_chat", "phoenix_planner_turn"} <= names


@pytest.mark.parametrize(
    ("page", "index", "name"),
    [pytest.param(*where, id=f"{where[0].relative_to(REPO)}:{where[2]}") for where in shown()],
)
def test_each_picture_is_the_one_recorded_and_its_page_names_its_source(
    page: Path, index: int, name: str
) -> None:
    pictures = load_manifest()
    assert name in pictures, f"{name}.png has no entry in {MANIFEST}: run `make test-browser`"
    entry = pictures[name]
    png = PICTURES / f"{name}.png"
    assert png_sha256(png) == entry["png_sha256"], (
        f"{png} is not the picture {MANIFEST.name} was written with: refresh both with "
        "`make test-browser`"
    )
    assert entry["text"], f"{name}: the recorded picture shows no text"
    # the test that takes it exists
    test_file, _, test_name = entry["source"]["test"].partition("::")
    assert f"def {test_name}(" in (REPO / test_file).read_text(encoding="utf-8")
    # the page says where the picture comes from: its notebook, else its test
    lines = page.read_text(encoding="utf-8").splitlines()
    caption = "\n".join(lines[max(0, index - NEAR) : index + NEAR + 1])
    notebook = entry["source"].get("notebook", "")
    named = Path(notebook).stem if notebook else test_file
    assert named in caption, f"{page.name}: the text around {name}.png never names {named}"
    model = entry["source"]["model"]
    assert model in caption, f"{page.name}: the text around {name}.png never says the {model} model"


def test_a_picture_whose_text_changed_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed, shots = tmp_path / "committed", tmp_path / "run"
    committed.mkdir()
    shots.mkdir()
    monkeypatch.setattr(_pictures, "PICTURES", committed)
    monkeypatch.setattr(_pictures, "MANIFEST", committed / "pictures.json")
    source = {"notebook": "01_chat.ipynb", "parameters": {}, "model": "scripted", "test": "t"}
    (committed / "panel.png").write_bytes(b"\x89PNG first")
    _pictures.check_picture(committed, "panel", ["user: hi", "assistant: hello"], source)
    recorded = json.loads((committed / "pictures.json").read_text())["pictures"]["panel"]
    assert recorded["png_sha256"] == png_sha256(committed / "panel.png")

    (shots / "panel.png").write_bytes(b"\x89PNG second")  # pixels differ: not compared
    _pictures.check_picture(shots, "panel", ["user: hi", "assistant: hello"], source)
    with pytest.raises(AssertionError, match=r"panel.png is stale — what it shows changed"):
        _pictures.check_picture(shots, "panel", ["user: hi", "assistant: bye"], source)
    with pytest.raises(AssertionError, match=r"its source changed"):
        _pictures.check_picture(shots, "panel", recorded["text"], {**source, "model": "embedded"})
    (shots / "other.png").write_bytes(b"\x89PNG other")
    with pytest.raises(AssertionError, match=r"no entry"):
        _pictures.check_picture(shots, "other", ["user: hi"], source)


def test_what_varies_between_runs_is_masked_and_nothing_else() -> None:
    text = (
        "conversation 3f2a9c1e07b4 · 2026-12-07T05:31:02Z\n\n  took 412 ms, then 1.5 s  \n"
        "trace 0af7651916cd43dd8448eb211c80319c at 05:31\nYou have 2 traders: alpha, beta\n"
        "conv-mxct46bifd5g6zszia · model scripted:/tmp/pytest-of-root/p-1/script.json · 9543 in"
    )
    assert normalise(text) == [
        "conversation <id> · <time>",
        "took <duration>, then <duration>",
        "trace <id> at <time>",
        "You have 2 traders: alpha, beta",
        "<id> · model scripted:<path> · <n> in",
    ]
