"""The documentation site in a real browser, read from disk as a newcomer would after
``make docs``: Debian's chromium (through Playwright, nothing downloaded) opens the built
index and the first tutorial from ``file://``, follows the navigation between them, and every
request the pages make stays on disk. Both are saved as PNGs in the test's temp folder, or in
``$AGENTKIT_SCREENSHOT_DIR`` (``make test-browser`` sets ``docs/screenshots/``).

Skips without /usr/bin/chromium unless ``AGENTKIT_REQUIRE_BROWSER`` is set (CI sets it).
"""

from __future__ import annotations

from pathlib import Path

from tests.test_browser import CHROMIUM, require_browser, screenshot_dir
from tests.test_docs_site import build_site

WAIT_MS = 120_000


def test_the_built_site_opens_from_disk_and_fetches_nothing_else(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    site = tmp_path / "site"
    built = build_site(site)
    assert built.returncode == 0, built.stdout + built.stderr
    shots = screenshot_dir(tmp_path / "screenshots")
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(WAIT_MS)
            page.on("request", lambda request: requests.append(request.url))
            page.goto((site / "index.html").as_uri())
            page.locator("article h1", has_text="agentkit").wait_for()
            page.locator("article", has_text="Where to start").wait_for()
            # the theme's own stylesheet and script came from disk (the page is styled)
            assert page.locator(".md-header").is_visible()
            page.screenshot(path=str(shots / "docs_index.png"))

            # the first tutorial, reached the way a reader does: its link on the index
            page.locator("article a", has_text="Your first chat in a notebook").first.click()
            page.wait_for_url("**/tutorials/first-chat.html")
            page.locator("article h1", has_text="first chat").wait_for()
            page.locator("article pre code").first.wait_for()
            page.screenshot(path=str(shots / "docs_tutorial.png"))
        finally:
            browser.close()
    assert any(url.endswith("/index.html") for url in requests)
    assert any(url.endswith(".css") for url in requests)
    elsewhere = [url for url in requests if not url.startswith(("file://", "data:", "blob:"))]
    assert elsewhere == []
    for name in ("docs_index.png", "docs_tutorial.png"):
        assert (shots / name).stat().st_size > 10_000
