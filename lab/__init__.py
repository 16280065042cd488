"""The agentkit workbench: thin ipywidgets views over agentkit's public API.

The dashboards (chat panel, plan view, TaskState editor, compression lab, conversation
browser, prompt lab) arrive with issue #6. This package may import ipywidgets and pandas;
``agentkit`` itself never imports ``lab``.
"""
