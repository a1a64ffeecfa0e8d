"""The consoles the CLI prints to, made on first use: rich is imported only by commands that print
through it, so `hoh --help` stays fast.

They print text, never a control sequence a role wrote (`hoh.terminal`): a string is made visible before rich
lays it out (`render_str`, so a table's widths count what is shown), and every segment rich renders is made
visible again before it is written (`render`: a `Text` or JSON built without `render_str`, a table's cell),
rich's own cursor and style codes apart. Rich alone would pass ESC and C1 through, and drop a CR unseen.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ..terminal import HIDDEN_IN_LINES, terminal_text

if TYPE_CHECKING:
    from rich.console import Console


@cache
def _console_class() -> type["Console"]:
    from rich.console import Console
    from rich.segment import Segment

    class TerminalConsole(Console):
        """A rich console that shows the controls in what it prints (newlines and tabs are text's)."""

        def render_str(self, text: str, **kwargs):  # type: ignore[override]
            return super().render_str(terminal_text(text, lines=True), **kwargs)

        def render(self, renderable, options=None):  # type: ignore[override]
            for segment in super().render(renderable, options):
                if segment.control is None and HIDDEN_IN_LINES.search(segment.text):
                    segment = Segment(terminal_text(segment.text, lines=True), segment.style)
                yield segment

    return TerminalConsole


def console(**kwargs) -> "Console":
    """A console of hoh's: rich's, printing text only."""
    return _console_class()(**kwargs)


@cache
def out() -> "Console":
    return console()


@cache
def err() -> "Console":
    return console(stderr=True)
