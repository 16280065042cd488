"""The documentation site: ``mkdocs build --strict`` succeeds on the tree as committed, and the
built site fetches nothing from the network (no fonts, scripts, styles or images from
elsewhere: it is read offline, from disk)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: a URL that leaves the machine: a scheme other than file/data/blob, or protocol-relative
NETWORK = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "javascript:", "mailto:", "#")
#: <link rel=…> values a browser does not fetch
NOT_FETCHED_RELS = {"canonical", "alternate", "author", "license", "next", "prev", "help", "me"}
#: attributes by tag that make a browser fetch
FETCHING = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "iframe": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
    "track": ("src",),
}
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.IGNORECASE)


def is_network(url: str) -> bool:
    url = url.strip()
    if url.lower().startswith(LOCAL_SCHEMES):
        return False
    return bool(NETWORK.match(url)) or url.lower().startswith(("http:", "https:"))


class Fetches(HTMLParser):
    """Every URL a page makes the browser fetch: fetching attributes, stylesheets and icons,
    inline styles and <style> blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.mermaid = False
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        for name in FETCHING.get(tag, ()):
            if values.get(name):
                self.urls.extend(
                    part.split()[0] for part in values[name].split(",") if part.strip()
                )
        if tag == "link" and values.get("href"):
            rels = set(values.get("rel", "").lower().split())
            if not rels or not rels <= NOT_FETCHED_RELS:
                self.urls.append(values["href"])
        if "style" in values:
            self.urls.extend(CSS_URL.findall(values["style"]))
        if "mermaid" in values.get("class", "").split():
            self.mermaid = True  # Material would load mermaid from a CDN
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls.extend(CSS_URL.findall(data))


def build_site(target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    built = build_site(target)
    assert built.returncode == 0, built.stdout + built.stderr
    return target


def test_the_site_builds_strict_and_fetches_nothing_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert (site / "index.html") in pages and len(pages) >= 25
    fetched: dict[str, list[str]] = {}
    for page in pages:
        parser = Fetches()
        parser.feed(page.read_text(encoding="utf-8"))
        assert not parser.mermaid, page
        remote = [url for url in parser.urls if is_network(url)]
        if remote:
            fetched[str(page.relative_to(site))] = remote
        # every local fetch resolves to a file of the site (404.html is for web servers: its
        # links are absolute from the site's root)
        for url in parser.urls if page.name != "404.html" else ():
            if not is_network(url) and not url.startswith(LOCAL_SCHEMES):
                local = (page.parent / url.split("#")[0].split("?")[0]).resolve()
                assert local.is_file(), (page, url)
    for sheet in site.rglob("*.css"):
        remote = [u for u in CSS_URL.findall(sheet.read_text(encoding="utf-8")) if is_network(u)]
        if remote:
            fetched[str(sheet.relative_to(site))] = remote
    assert fetched == {}
    # no Google Fonts anywhere (Material's default when theme.font is not false)
    for path in site.rglob("*"):
        if path.suffix in {".html", ".css", ".js"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "fonts.googleapis.com" not in text and "fonts.gstatic.com" not in text, path


def test_the_fetch_check_sees_fonts_scripts_styles_and_images() -> None:
    """The checker itself: each kind of network fetch is caught, links and local files not."""
    page = """
    <link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">
    <link rel="preconnect" href="//fonts.gstatic.com">
    <link rel="canonical" href="https://example.org/page/">
    <script src="https://cdn.example/x.js"></script><script src="assets/bundle.js"></script>
    <img src="http://example.org/a.png"><img src="../screenshots/a.png">
    <div style="background: url('https://example.org/b.png')"></div>
    <style>@import "https://example.org/c.css";</style>
    <a href="https://github.com/">a link is not a fetch</a>
    """
    parser = Fetches()
    parser.feed(page)
    assert [url for url in parser.urls if is_network(url)] == [
        "https://fonts.googleapis.com/css?family=Roboto",
        "//fonts.gstatic.com",
        "https://cdn.example/x.js",
        "http://example.org/a.png",
        "https://example.org/b.png",
        "https://example.org/c.css",
    ]
