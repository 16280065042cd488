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
    ".agentkit-table { border-collapse: collapse; font-size: 12px; margin: 4px 0;"
    " max-width: 100%; }"
    ".agentkit-table th, .agentkit-table td { padding: 3px 8px; text-align: left !important;"
    " vertical-align: top; border-bottom: 1px solid #e5e7eb; line-height: 1.4; }"
    ".agentkit-table td { max-width: 36em; overflow-wrap: anywhere; }"
    ".agentkit-table th { background: #f5f5f4; }"
    "</style>"
)
# pandas writes a cell's line break as the two characters "\n": these stand-ins pass through
# it unchanged and become real breaks (a <br>) and tabs afterwards
_BREAK, _TAB = "\ue000", "\ue001"


def _breaks_kept(value: object) -> object:
    if isinstance(value, str):
        return value.replace("\r\n", "\n").replace("\n", _BREAK).replace("\t", _TAB)
    return value


def frame_html(frame: pd.DataFrame, *, empty: str = "(nothing yet)", css_class: str = "") -> str:
    """A DataFrame as an HTML table (cells escaped, line breaks shown as breaks), or *empty*
    when it has no rows."""
    if frame.empty:
        return f"<i>{escape(empty)}</i>"
    classes = ["agentkit-table", *([css_class] if css_class else [])]
    shown = frame.copy()
    for column in shown.columns:
        if shown[column].dtype == object or pd.api.types.is_string_dtype(shown[column]):
            shown[column] = shown[column].map(_breaks_kept)
    html = shown.to_html(index=False, escape=True, classes=classes, border=0, justify="left")
    return _TABLE_STYLE + html.replace(_BREAK, "<br>").replace(_TAB, "&#9;")


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
