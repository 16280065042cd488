"""The pictures in the README and the docs, and the check that each is what its source shows now.

Every picture under ``docs/screenshots/`` is taken by a browser test from a notebook, a page or
a command (``make test-browser`` writes them there). Pixels differ between machines (fonts,
anti-aliasing), so what a picture shows is pinned as text: ``docs/screenshots/pictures.json``
holds, per picture, its *source* (the test, the notebook or page and its parameters, the
model) and its *text* — the visible text of the element photographed, with what varies from
run to run masked (ids, times, durations and tables' timing columns, temp paths; the embedded
model's own words where a picture shows them). Inside ``make test`` the same tests
photograph into a temp folder and compare: a picture whose text or source changed is stale
and fails, saying how to refresh it. A static test (``tests/test_docs_pictures.py``) checks
that the committed PNG is the one the manifest was written with and that the page beside each
picture names its source.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PICTURES = REPO / "docs" / "screenshots"
MANIFEST = PICTURES / "pictures.json"
VERSION = 1

#: what varies between two runs of the same source, masked before the texts are compared
_VOLATILE = (
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<date>"),
    (re.compile(r"\b\d\d?:\d\d(:\d\d)?( ?[AP]M)?\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<id>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds|µs|us|min)\b"), "<duration>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(KB|MB|kB|B)\b"), "<size>"),
    (re.compile(r"\b[a-z]{2,6}-[0-9a-z]{16,}\b"), "<id>"),  # agentkit's conv-…, msg-… ids
    (re.compile(r"(?<![\w/.])/(tmp|var|private|home|root)/\S*"), "<path>"),  # temp folders
    (re.compile(r"\b\d{4,}\b"), "<n>"),  # token counts (the prompt holds paths)
)

#: JavaScript: the element's visible text with the given selectors' text replaced by a mark
_TEXT_JS = """(element, masks) => {
  const copy = element.cloneNode(true);
  for (const selector of masks) {
    for (const node of copy.querySelectorAll(selector)) node.textContent = "<model text>";
  }
  // a table's timing columns (a header ending in _ms, _s or Ms, or naming a latency): they vary
  for (const table of copy.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("thead th, tr:first-child th")];
    heads.forEach((head, index) => {
      const name = head.textContent.trim();
      if (!/(_ms|_s|Ms|Seconds)$/.test(name) && !/latency|duration|seconds/i.test(name)) return;
      for (const row of table.querySelectorAll("tbody tr")) {
        const cell = row.children[index];
        if (cell) cell.textContent = "<duration>";
      }
    });
  }
  copy.style.position = "absolute";
  copy.style.left = "-20000px";
  document.body.appendChild(copy);
  const text = copy.innerText;
  copy.remove();
  return text;
}"""


def normalise(text: str) -> list[str]:
    """*text* as the compared lines: volatile parts masked, blank lines and edges dropped."""
    lines = []
    for raw in text.splitlines():
        line = raw
        for pattern, mark in _VOLATILE:
            line = pattern.sub(mark, line)
        if words := line.split():
            lines.append(" ".join(words))
    return lines


def refreshing(shots: Path) -> bool:
    """Whether this run writes the committed pictures (``make test-browser``)."""
    return shots.resolve() == PICTURES.resolve()


def load_manifest() -> dict[str, Any]:
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert data.get("version") == VERSION, f"{MANIFEST}: unknown version {data.get('version')}"
    pictures: dict[str, Any] = data["pictures"]
    return pictures


def _write_entry(name: str, entry: dict[str, Any]) -> None:
    pictures = load_manifest() if MANIFEST.exists() else {}
    pictures[name] = entry
    document = {"version": VERSION, "pictures": dict(sorted(pictures.items()))}
    MANIFEST.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")


def png_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_picture(shots: Path, name: str, lines: list[str], source: dict[str, Any]) -> None:
    """Record (refreshing) or compare (otherwise) picture *name*'s source and text lines."""
    png = shots / f"{name}.png"
    assert png.exists(), f"{png} was not written"
    if refreshing(shots):
        _write_entry(name, {"source": source, "text": lines, "png_sha256": png_sha256(png)})
        return
    pictures = load_manifest()
    assert name in pictures, (
        f"docs/screenshots/{name}.png has no entry in {MANIFEST.name}: run `make test-browser`"
    )
    entry = pictures[name]
    stale = []
    if entry["source"] != source:
        stale.append(f"its source changed: {entry['source']} -> {source}")
    if entry["text"] != lines:
        diff = difflib.unified_diff(entry["text"], lines, "committed", "now", lineterm="", n=1)
        stale.append("what it shows changed:\n" + "\n".join(diff))
    assert not stale, (
        f"docs/screenshots/{name}.png is stale — "
        + "; ".join(stale)
        + "\nRefresh the pictures with `make test-browser` and commit docs/screenshots/."
    )


def take_picture(
    element: Any,
    shots: Path,
    name: str,
    source: dict[str, Any],
    *,
    masks: tuple[str, ...] = (),
    page: bool = False,
) -> None:
    """Photograph *element* (a Playwright locator, or a page with *page*) as ``NAME.png``
    in *shots*, then record or compare what it shows (:func:`check_picture`). *masks*:
    selectors whose text is the model's own words (masked: they vary with the machine)."""
    element.screenshot(path=str(shots / f"{name}.png"))
    target = element.locator("body") if page else element
    text = target.evaluate(_TEXT_JS, list(masks))
    check_picture(shots, name, normalise(str(text)), source)
