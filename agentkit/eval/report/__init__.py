"""One self-contained HTML report of a sweep (``agentkit report``): a file to send.

:func:`write_report` renders a results table — and, when given, its comparison with another
table or between two of its points — into one HTML file that opens from disk with nothing
fetched: its styles, its filter script and its pass-rate interval plot (inline SVG) are in
the page, and a Content-Security-Policy forbids any other source. It holds the summary
table, a per-category (tag) table, each variant's pass rate with its Wilson interval, the
comparison (:mod:`agentkit.eval.pairs`: McNemar, the bootstrap interval, the pairs flips first,
each pair's transcripts side by side with the first divergence marked) and every run's row
with its transcript (:mod:`agentkit.eval.timeline`) collapsed under it, filterable by outcome
and by "flipped".

A report holds at most *limit* transcripts (flipped runs first, then those that did not pass,
then the rest); every run past it keeps its row, and the page says how many were left out
and why. The templates are Jinja (``templates/``), autoescaped: no text from a run reaches
the page unescaped. :func:`transcript_html` and :func:`side_by_side_html` are the fragments
the lab widgets show (with :func:`style`).
"""

from agentkit.eval.report._render import (
    DEFAULT_LIMIT,
    Table,
    render_report,
    side_by_side_html,
    style,
    transcript_html,
    write_report,
)
from agentkit.eval.report._svg import Interval, interval_svg

__all__ = [
    "DEFAULT_LIMIT",
    "Interval",
    "Table",
    "interval_svg",
    "render_report",
    "side_by_side_html",
    "style",
    "transcript_html",
    "write_report",
]
