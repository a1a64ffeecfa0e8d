"""`hoh status`'s layout as the very bytes rich prints for it, without rich, when that is certain.

Rich costs more than the rest of `hoh status` together (its import and its table layout). Where rich prints no
styles (not a terminal, by rich's own test) and every cell and line is text whose layout this module repeats
exactly (characters one cell wide, nothing rich would read as markup or an emoji code, columns that fit the
width), the same text is written here. Anything else returns None and rich prints it as ever; the tests
compare both over real workspaces and widths.
"""

from __future__ import annotations

import os
import re
from typing import IO, Mapping, Sequence

from .status import Block, Grid, LineKind

ONE_CELL = frozenset(chr(c) for c in range(0x20, 0x7F)) | frozenset("·…–—→")
"""Characters rich gives one cell and prints as they are (no tab, no control character)."""
_MARKUP = frozenset("[\\")
"""What rich's markup parser could read as a tag or an escape, in a line printed with markup."""
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
"""Rich's emoji code (`:smile:`, `:smile-text:`), which it replaces when the name is one of its emoji."""
_WORD = re.compile(r"\s*\S+\s*")
"""A word as rich's wrap sees it: its leading and trailing spaces included."""
DEFAULT_WIDTH = 80


def styled(stdout: IO[str], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether rich would treat `stdout` as a terminal (and print styles): rich's `Console.is_terminal`."""
    compatible = environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    if (force := environ.get("FORCE_COLOR")) is not None:
        return force != ""
    try:
        return stdout.isatty()
    except (AttributeError, ValueError):
        return False


def width(environ: Mapping[str, str] = os.environ) -> int:
    """The width rich lays out to when it prints no styles: `COLUMNS` if a number, else the first standard
    stream's terminal's, else 80 (rich's `Console.width`)."""
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for fd in (0, 1, 2):
        try:
            found = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        return found or DEFAULT_WIDTH
    return DEFAULT_WIDTH


def _plain(text: str, markup: bool) -> bool:
    return ONE_CELL.issuperset(text) and not (markup and not _MARKUP.isdisjoint(text)) and not _has_emoji(text)


def _has_emoji(text: str) -> bool:
    """Whether rich would replace an emoji code in `text` (rare: a clock's `03:04:` has the form, and is none)."""
    codes = [name.lower() for _, name, _ in _EMOJI_CODE.findall(text)]
    if not codes:
        return False
    try:
        from rich._emoji_codes import EMOJI
    except ImportError:  # a rich that keeps them elsewhere: any code may be one
        return True
    return any(code in EMOJI for code in codes)


def wrap(text: str, columns: int) -> list[str] | None:
    """`text` in lines of at most `columns`, broken before words as rich breaks them; None when a word is
    longer than a line (rich folds it)."""
    if len(text) <= columns:
        return [text]
    starts, used = [0], 0
    for match in _WORD.finditer(text):
        word = match.group()
        length = len(word.rstrip())
        if columns - used >= length:
            used += len(word)
        elif length > columns:
            return None
        elif used and match.start():
            starts.append(match.start())
            used = len(word)
    lines = []
    for start, end in zip(starts, starts[1:] + [len(text)]):
        line = text[start:end]
        if len(line) > columns:  # rich drops trailing spaces past the width, no more
            line = line[:len(line) - min(len(line) - len(line.rstrip()), len(line) - columns)]
        if len(line) > columns:
            return None
        lines.append(line)
    return lines


def _grid(grid: Grid, columns: int) -> list[str] | None:
    """A borderless rich table (no edge padding, one space each side of a cell) at its natural width."""
    rows = [grid.columns, *grid.rows]
    if not all(_plain(cell, markup=True) for row in rows for cell in row):
        return None
    widths = [max(len(row[n]) for row in rows) for n in range(len(grid.columns))]
    if sum(widths) + 2 * (len(widths) - 1) > columns:
        return None  # rich would narrow the columns and fold cells
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]


def render(blocks: Sequence[Block], columns: int) -> str | None:
    """The text rich prints for `blocks` at `columns` without styles, or None if that is not certain."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Grid):
            lines = _grid(block, columns)
        else:
            lines = wrap(block.text, columns) if _plain(block.text, markup=block.kind is not LineKind.TEXT) else None
        if lines is None:
            return None
        out += lines
    return "".join(line + "\n" for line in out)
