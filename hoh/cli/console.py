"""The consoles the CLI prints to, made on first use: rich is imported only by commands that print
through it, so `hoh --help` stays fast."""

from __future__ import annotations

from functools import cache

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


@cache
def out() -> "Console":
    from rich.console import Console
    return Console()


@cache
def err() -> "Console":
    from rich.console import Console
    return Console(stderr=True)
