"""`make lab` starts JupyterLab on notebooks/, bound to 127.0.0.1, and prints a tokened URL."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests._processes import stop_group

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_json(url: str) -> dict[str, list[dict[str, str]]]:
    """GET *url*, retrying while the server is still opening its socket (bounded by the
    test's timeout)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=60) as reply:
                return json.load(reply)  # type: ignore[no-any-return]
        except urllib.error.URLError as error:
            if not isinstance(error.reason, ConnectionRefusedError):
                raise
            time.sleep(0.5)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_serves_the_notebooks_with_a_token() -> None:
    port = free_port()
    process = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "JUPYTER_PLATFORM_DIRS": "1"},
    )
    url = None
    try:
        assert process.stdout is not None
        while url is None:  # until the URL or the end of its output (the test's timeout bounds it)
            line = process.stdout.readline()
            if not line:
                break
            match = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", line)
            if match:
                url = match.group(0)
                token = match.group(1)
        assert url is not None, "make lab printed no URL with a token"
        base = f"http://127.0.0.1:{port}"
        listing = get_json(f"{base}/api/contents?token={token}")
        names = {entry["name"] for entry in listing["content"]}
        assert "00_conversations.ipynb" in names
        request = urllib.request.Request(f"{base}/api/contents")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        refused.value.close()
        assert refused.value.code == 403  # no token, no access
    finally:
        stop_group(process)
        if process.stdout is not None:
            process.stdout.close()
