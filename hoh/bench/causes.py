"""The line of an error that says why: what a note shows first, while the full text stays in the record.

Harbor's exceptions for a failed environment carry the whole `docker compose …` command line first and the
daemon's or the build's reason deep inside; a verifier that could not run writes a 0 and says why only in its
output. `cause_of` picks the telling line out of such a text; `telling_lines` collects every one of them (a
verifier's log, a reference solution's output), so a report can say *why* a grade is not a grade.
"""

from __future__ import annotations

import re

TELLING = re.compile("|".join([
    r"Could not resolve host", r"Name or service not known", r"Temporary failure in name resolution",
    r"no such host", r"Network is unreachable", r"Connection refused", r"Connection timed out",
    r"Failed to connect", r"No module named", r"ModuleNotFoundError", r"command not found",
    r"No such file or directory", r"Unable to locate package", r"E: Package .* has no installation candidate",
    r"Error response from daemon", r"failed to solve", r"pull access denied", r"manifest unknown",
    r"No space left on device", r"Permission denied", r"[Uu]nknown provider", r"401 Unauthorized",
    r"403 Forbidden", r"[Ii]nvalid API key", r"[Tt]imed out",
]))
"""Phrases that name a cause (DNS, network, a missing module, package or command, the engine's refusal,
a provider refusing the request) rather than where it happened."""

EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Group)):\s")
LINE_LIMIT = 300


def _lines(text: str) -> list[str]:
    # Harbor and Docker embed their outputs with literal "\n"s inside one message line.
    text = text.replace("\\n", "\n").replace("\\r", "")
    return [line.strip().lstrip("|│ ").strip() for line in text.splitlines() if line.strip()]


def _short(line: str) -> str:
    return line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT - 1] + "…"


def telling_lines(text: str | None, limit: int = 5) -> list[str]:
    """Every distinct line of `text` that names a cause, in order, at most `limit`."""
    found: list[str] = []
    source = False  # the line after a traceback's `File "…", line N` is source code, not a message
    for line in _lines(text or ""):
        code, source = source, line.startswith('File "')
        if code or source or line.startswith(("Command:", "$ ")):
            continue
        if TELLING.search(line):
            short = _short(line)
            if short not in found:
                found.append(short)
        if len(found) == limit:
            break
    return found


def cause_of(text: str | None) -> str | None:
    """The one line that says why: the first telling line, else the first exception line, else the first line."""
    if not text:
        return None
    lines = _lines(text)
    telling = telling_lines(text, limit=1)
    if telling:
        head = lines[0] if EXCEPTION_LINE.match(lines[0]) else None
        kind = EXCEPTION_LINE.match(head).group(1) if head else None
        return _short(f"{kind}: {telling[0]}" if kind and not telling[0].startswith(kind) else telling[0])
    exception = next((line for line in lines if EXCEPTION_LINE.match(line)), None)
    return _short(exception or (lines[0] if lines else text.strip()))
