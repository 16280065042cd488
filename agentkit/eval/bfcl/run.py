"""``run_bfcl``: BFCL suites through the harness, with the model-alone baseline beside them.

The suites' scenarios go to :func:`~agentkit.eval.run_eval` like any others (every option of
it applies: grids over strategy, tool choice and compression, repeats, budgets, workers,
concurrency); with ``prompt_mode`` the same items are also run by the model alone in BFCL's
prompt mode (:mod:`agentkit.eval.bfcl.prompt_mode`), and its rows join the table with
``bfcl_mode`` ``prompt``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.agent_folder import AgentFolder, resolve_data_dir
from agentkit.errors import UsageError
from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
from agentkit.eval.bfcl.suite import DEFAULT_AGENT, BfclScenario, MemoryContext, load_suite
from agentkit.eval.bfcl.toolset import find_item
from agentkit.eval.results import require_pandas
from agentkit.eval.sweep import run_eval
from agentkit.models.base import ChatModel

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["prompt_mode_frame", "run_bfcl"]


def run_bfcl(
    suites: str | Iterable[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    agent: str = DEFAULT_AGENT,
    memory_context: MemoryContext = "compressed",
    prompt_mode: bool = False,
    model: str | ChatModel | None = None,
    data_dir: Path | str | None = None,
    **options: Any,  # noqa: ANN401 - run_eval's own keyword options, passed on as they are
) -> pd.DataFrame:
    """Run the ``bfcl:…`` *suites* (see :func:`load_suite`) with :func:`run_eval` (*options*
    are its keyword arguments); with *prompt_mode*, the model-alone baseline too."""
    scenarios = load_suite(
        suites, limit=limit, seed=seed, agent=agent, memory_context=memory_context
    )
    frame = run_eval(scenarios, model=model, data_dir=data_dir, **options)
    if not prompt_mode:
        return frame
    spec = model if model is not None else _agent_model(agent, data_dir)
    return with_prompt_mode(frame, scenarios, spec, progress=bool(options.get("progress")))


def with_prompt_mode(
    frame: pd.DataFrame,
    scenarios: Iterable[BfclScenario],
    model: str | ChatModel,
    *,
    progress: bool = False,
) -> pd.DataFrame:
    """*frame* with the prompt-mode rows of *scenarios*' items (memory items have none)."""
    return _joined(frame, prompt_mode_frame(scenarios, model, progress=progress))


def prompt_mode_frame(
    scenarios: Iterable[BfclScenario], model: str | ChatModel, *, progress: bool = False
) -> pd.DataFrame:
    """The model-alone rows of *scenarios*' items."""
    require_pandas()
    import pandas as pd

    items = [find_item(s.bfcl.item) for s in scenarios if s.bfcl.category != "memory"]
    seen = dict.fromkeys(item.id for item in items)
    chosen = [next(item for item in items if item.id == key) for key in seen]
    return pd.DataFrame(run_prompt_mode(chosen, model, progress=progress))


def _joined(frame: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    if extra.empty:
        return frame
    params = list(frame.attrs.get("params", []))
    joined = pd.concat([frame, extra], ignore_index=True)
    joined.attrs["params"] = params
    return joined


def _agent_model(agent: str, data_dir: Path | str | None) -> str:
    try:
        return AgentFolder.load(resolve_data_dir(data_dir), agent).config.model
    except Exception as error:
        raise UsageError(f"no model given and agent {agent!r} cannot be read: {error}") from error
