"""The agentkit workbench: thin ipywidgets views over agentkit's public API.

Each view renders what plain functions (in the ``*_state``, ``*_table``, ``*_form`` and
``*_tables`` modules) derive from agentkit objects, and calls the public ``Agent`` API; none
keeps state of its own beyond what is on screen. This package may import ipywidgets and
pandas (the ``lab`` extra; without it, importing ``lab`` raises ``MissingExtraError``);
``agentkit`` itself never imports ``lab``.
"""

from agentkit.errors import MissingExtraError

try:
    import ipywidgets  # noqa: F401
    import pandas  # noqa: F401
except ImportError as _missing:
    raise MissingExtraError("lab", "the workbench (lab)", module=_missing.name or "") from _missing

from lab.branch_view import BranchView
from lab.chat_panel import ChatPanel
from lab.compression_lab import CompressionLab
from lab.conversation_browser import ConversationBrowser
from lab.plan_view import PlanView
from lab.prompt_lab import PromptLab
from lab.run_browser import RunBrowser
from lab.side_by_side import SideBySide
from lab.task_state_editor import TaskStateEditor
from lab.trace_view import TraceView

__all__ = [
    "BranchView",
    "ChatPanel",
    "CompressionLab",
    "ConversationBrowser",
    "PlanView",
    "PromptLab",
    "RunBrowser",
    "SideBySide",
    "TaskStateEditor",
    "TraceView",
]
