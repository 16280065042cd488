"""Distributed sweeps: a real Dask LocalCluster (two worker processes) gives the same table as
the local executor for the scripted model, from Python and from ``agentkit eval --executor``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval import RUN_SPECIFIC_COLUMNS, load_scenarios, run_eval
from distributed import Client, LocalCluster

from .conftest import REPO, run_cli

SCENARIOS = REPO / "data" / "scenarios"
GRID = {"compression.token_threshold": [300, 2000]}
TAGS = ("compression", "out_of_band", "restart")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as running:
        yield running


def without_timings(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=list(RUN_SPECIFIC_COLUMNS))


def test_a_dask_client_gives_the_same_table_as_the_local_executor(
    cluster: LocalCluster, data_dir: Path
) -> None:
    chosen = load_scenarios(SCENARIOS, tags=TAGS)
    local = run_eval(chosen, model="scripted", grid=GRID, data_dir=data_dir, progress=False)
    with Client(cluster, set_as_default=False) as client:
        distributed = run_eval(
            chosen, model="scripted", grid=GRID, executor=client, data_dir=data_dir, progress=False
        )
        # the work really ran on the cluster's two worker processes
        assert len(client.scheduler_info()["workers"]) == 2
    assert len(local) == 2 * len(chosen) >= 12
    pd.testing.assert_frame_equal(without_timings(distributed), without_timings(local))
    assert distributed.attrs == local.attrs


def test_the_cli_reaches_a_scheduler_by_address(
    cluster: LocalCluster, data_dir: Path, tmp_path: Path
) -> None:
    address = cluster.scheduler_address.removeprefix("tcp://")
    frames = {}
    for executor in ("local", f"dask://{address}"):
        out = tmp_path / f"{executor.split(':')[0]}.parquet"
        result = run_cli(
            "--data-dir", str(data_dir), "eval", str(SCENARIOS), "--model", "scripted",
            "--tag", "compression", "--grid", "compression.token_threshold=300,900,2000",
            "--executor", executor, "--out", str(out), "--no-progress",
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        frames[executor] = pd.read_parquet(out)
    local, distributed = frames.values()
    assert len(distributed) == 9
    pd.testing.assert_frame_equal(without_timings(distributed), without_timings(local))
