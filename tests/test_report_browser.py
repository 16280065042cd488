"""The report and the run views in a real browser (Debian's chromium driven by Playwright).

* The HTML report of a two-point sweep opens from a ``file://`` URL with every request the
  page makes recorded: none may leave the file (no style, font, script or image fetched).
  Its "flipped only" filter shows exactly the flipped runs, and a run's transcript expands.
* Notebook 11 runs in JupyterLab on loopback: the run browser and the side-by-side view
  render there.

Each is saved as a PNG in the test's temp folder, or in ``$AGENTKIT_SCREENSHOT_DIR``
(``make test-browser`` sets ``docs/screenshots/``). It skips when chromium is missing, unless
``AGENTKIT_REQUIRE_BROWSER`` is set (CI), like tests/test_browser.py, whose helpers it uses.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval.report import write_report

from tests._processes import stop_group
from tests._report_sweep import CONSENT, FLIPS, NAMES, RAW_SECRETS, SCENARIOS, two_point_sweep
from tests.test_browser import (
    CHROMIUM,
    JUPYTER,
    TOKEN,
    WAIT_MS,
    Lab,
    free_port,
    png_size,
    require_browser,
    run_all_cells,
    screenshot_dir,
    wait_for_server,
    write_parameterised,
)

LAUNCH = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return two_point_sweep(tmp_path_factory.mktemp("sweep"))


def test_the_report_opens_from_disk_filters_the_flips_and_expands_a_transcript(
    sweep: pd.DataFrame, tmp_path: Path
) -> None:
    require_browser()
    from playwright.sync_api import Request, expect, sync_playwright

    report = write_report(sweep, tmp_path / "report.html", compare_points=(0, 1))
    url = report.resolve().as_uri()
    shots = screenshot_dir(tmp_path / "screenshots")
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(WAIT_MS)

            def seen(request: Request) -> None:
                requested.append(request.url)

            page.on("request", seen)
            page.goto(url)
            runs = page.locator("tbody.ak-run")
            expect(runs).to_have_count(len(sweep))
            expect(page.locator("#filter-count")).to_have_text(
                f"{len(sweep)} of {len(sweep)} runs shown"
            )

            page.locator("#filter-flipped").check()
            shown = page.locator("tbody.ak-run:visible")
            expect(shown).to_have_count(2)
            assert [shown.nth(i).get_attribute("data-scenario") for i in range(2)] == [
                FLIPS,
                FLIPS,
            ]
            assert {shown.nth(i).get_attribute("data-flipped") for i in range(2)} == {"1"}
            expect(page.locator("#filter-count")).to_have_text(f"2 of {len(sweep)} runs shown")

            # the failed side of the flip: its transcript expands under its row
            failed = page.locator('tbody.ak-run:visible[data-outcome="failed"]')
            details = failed.locator("details.ak-run-details")
            assert details.get_attribute("open") is None
            transcript = failed.locator(".ak-transcript")
            expect(transcript).to_be_hidden()
            failed.locator("summary", has_text="transcript").click()
            expect(transcript).to_be_visible()
            expect(transcript.locator(".ak-error").first).to_contain_text("no usable plan")
            assert details.get_attribute("open") is not None

            page.locator("#filter-flipped").uncheck()
            page.locator("#filter-outcome").select_option("passed")
            expect(page.locator("tbody.ak-run:visible")).to_have_count(int(sweep["passed"].sum()))
            page.locator("#filter-outcome").select_option("")
            text = page.locator("body").inner_text()
            for secret in RAW_SECRETS:
                assert secret not in text
            page.locator("#filter-flipped").check()
            page.screenshot(path=str(shots / "report.png"), full_page=False)
        finally:
            browser.close()
    assert requested == [url]  # the page itself, and nothing else
    width, height = png_size(shots / "report.png")
    assert width > 300 and height > 100


@pytest.fixture
def report_lab(tmp_path: Path, data_dir: Path) -> Iterator[Lab]:
    require_browser()
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    write_parameterised(
        "11_browse_and_report.ipynb",
        notebooks,
        {
            "data_dir": str(data_dir),
            "out_dir": str(tmp_path / "out"),
            "scenario_paths": [str(SCENARIOS / f"{name}.yaml") for name in NAMES],
        },
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
    }
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
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


def test_the_run_browser_and_the_side_by_side_view_in_jupyterlab(
    report_lab: Lab, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = screenshot_dir(tmp_path / "screenshots")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.set_default_timeout(WAIT_MS)
            run_all_cells(page, report_lab.url("11_browse_and_report.ipynb", "report"))

            runs = page.locator(".agentkit-run-browser")
            transcript = runs.locator(".agentkit-run-transcript")
            transcript.locator(".ak-error", has_text="no usable plan").first.wait_for()
            runs.locator(".agentkit-run-table", has_text=FLIPS).wait_for()
            # another outcome from the filter: a consent run's steps and decision
            runs.locator(".widget-dropdown", has_text="outcome").locator("select").select_option(
                "passed"
            )
            picker = runs.locator(".agentkit-run-picker select")
            option = picker.locator("option", has_text=f"{CONSENT} · p0 · passed")
            option.wait_for(state="attached")  # the list follows the filter
            picker.select_option(label=option.inner_text().strip())
            transcript.locator(".ak-consent", has_text="create_trader").first.wait_for()
            expect(transcript.locator(".ak-consent .ak-status").first).to_contain_text("approved")
            runs.scroll_into_view_if_needed()
            runs.screenshot(path=str(shots / "run_browser.png"))

            side = page.locator(".agentkit-side-by-side")
            side.scroll_into_view_if_needed()
            expect(side.locator(".agentkit-side-headline")).to_contain_text("McNemar")
            marked = side.locator(".agentkit-side-transcripts .ak-diverged")
            expect(marked).to_have_count(2)
            expect(marked.first).to_contain_text("first divergence")
            side.screenshot(path=str(shots / "side_by_side.png"))
        finally:
            browser.close()
    for name in ("run_browser", "side_by_side"):
        width, height = png_size(shots / f"{name}.png")
        assert width > 300 and height > 100, (name, width, height)
