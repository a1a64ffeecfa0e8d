"""Text for a terminal: what a role wrote is printed as text, never as a control sequence.

Titles, findings, summaries, tool calls, error messages and file names come from roles, and a terminal acts on
the controls in what it is sent: ESC starts the sequences that set the window title (OSC 0), write the user's
clipboard (OSC 52), clear the screen and move the cursor (CSI); a bare CR goes back over a line to hide it; the
C1 characters (U+0080–U+009F) are those controls in one character for some terminals; bidi overrides and
isolates reorder what the eye reads (Trojan Source), and zero-width characters hide text. `terminal_text` shows
each as its escape, as Python spells it in a string (`\\x1b`, `\\r`, `\\x9b`, `\\u202e`): printable ASCII, one
spelling per character. A literal backslash is left as it is, so paths, regexes and commands read (and copy)
as they were written; the shown text is for reading, not for parsing back.

`hoh/cli/console.py` applies it to everything hoh's rich consoles print, and the CLI to the lines it prints
without rich (errors, the log, `hoh status`'s plain text, `hoh replay`).
"""

from __future__ import annotations

import re

_HIDDEN = "\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff"
"""DEL, C1, the bidi marks, overrides and isolates, zero-width characters, the line and paragraph separators,
the byte-order mark, and lone surrogates (a name that was not UTF-8; a terminal's encoder would refuse it)."""
HIDDEN = re.compile(f"[\x00-\x1f{_HIDDEN}]")
"""What `terminal_text` makes visible in a one-line field: every C0 control besides."""
HIDDEN_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_HIDDEN}]")
"""What it makes visible in text printed over several lines: every C0 control but the newline and the tab
(a tab only moves the cursor on to the next stop)."""


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def terminal_text(text: str, lines: bool = False) -> str:
    """`text` with its control, bidi and invisible characters shown as escapes (`\\x1b]0;title\\x07`).

    `lines`: a field printed over several lines keeps its newlines and tabs (a CR before a newline goes: a
    Windows line end hides nothing); a one-line field shows them too (`\\n`), so it cannot fake a line of its own."""
    if lines:
        if HIDDEN_IN_LINES.search(text) is None:
            return text
        return HIDDEN_IN_LINES.sub(_escape, text.replace("\r\n", "\n"))
    return text if HIDDEN.search(text) is None else HIDDEN.sub(_escape, text)
