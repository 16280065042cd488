"""Small HTML builders for the widgets: every piece of user or model text is escaped here.

Invariant: text that came from a user, a model or a tool never reaches an ``HTML`` widget
unescaped (a reply containing ``<script>`` shows as text). DataFrames are rendered with
``to_html(escape=True)``.
"""

from __future__ import annotations

from html import escape

import pandas as pd

__all__ = ["frame_html", "message_html", "notice_html", "pre_html"]

_NOTICE_COLOURS = {"info": "#2563eb", "ok": "#15803d", "error": "#b91c1c", "warn": "#b45309"}


def pre_html(text: str, *, css_class: str = "") -> str:
    """*text* as a scrollable preformatted block."""
    cls = f' class="{escape(css_class)}"' if css_class else ""
    style = "white-space: pre-wrap; max-height: 18em; overflow-y: auto; margin: 0"
    return f'<pre{cls} style="{style}">{escape(text)}</pre>'


def notice_html(text: str, kind: str = "info") -> str:
    """A one-line status message (info, ok, warn or error); ``""`` for no message."""
    if not text:
        return ""
    colour = _NOTICE_COLOURS.get(kind, _NOTICE_COLOURS["info"])
    return (
        f'<div class="agentkit-notice agentkit-notice-{escape(kind)}" '
        f'style="color: {colour}">{escape(text)}</div>'
    )


_TABLE_STYLE = (
    "<style>"
    ".agentkit-table { border-collapse: collapse; font-size: 12px; margin: 4px 0; }"
    ".agentkit-table th, .agentkit-table td { padding: 3px 8px; text-align: left !important;"
    " vertical-align: top; border-bottom: 1px solid #e5e7eb; line-height: 1.4; }"
    ".agentkit-table th { background: #f5f5f4; }"
    "</style>"
)


def frame_html(frame: pd.DataFrame, *, empty: str = "(nothing yet)", css_class: str = "") -> str:
    """A DataFrame as an HTML table (cells escaped), or *empty* when it has no rows."""
    if frame.empty:
        return f"<i>{escape(empty)}</i>"
    classes = ["agentkit-table", *([css_class] if css_class else [])]
    return _TABLE_STYLE + frame.to_html(
        index=False, escape=True, classes=classes, border=0, justify="left"
    )


def message_html(role: str, text: str, *, css_class: str = "") -> str:
    """One chat bubble: the role in bold, then the text (line breaks kept)."""
    colours = {"user": "#eef2ff", "assistant": "#f0fdf4", "system": "#f5f5f4"}
    background = colours.get(role, "#f5f5f4")
    cls = f"agentkit-message agentkit-{escape(role)}" + (
        f" {escape(css_class)}" if css_class else ""
    )
    return (
        f'<div class="{cls}" style="background: {background}; padding: 4px 8px; '
        f'margin: 4px 0; border-radius: 6px; white-space: pre-wrap">'
        f"<b>{escape(role)}</b>: {escape(text)}</div>"
    )
