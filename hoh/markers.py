"""The lines that tie a prompt to its role attempt, rendered for every prompt and read back by fakes.

The Runtime puts `role_marker` on the first line of every prompt and `fact_line`s for the facts a
role must echo or use (the candidate id, the evidence dir). The mock model server has no other way
to know which role of which loop is calling, so it parses them with the functions here; nothing
else spells these formats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = "<!-- hoh:role={role} loop={loop} attempt={attempt} -->"
_MARKER_RE = re.compile(r"<!--\s*hoh:role=([\w-]+)\s+loop=(\d+)(?:\s+attempt=(\d+))?\s*-->")
FACTS = {"candidate_id": "Candidate id", "evidence_dir": "Evidence dir", "candidate_dir": "Candidate dir"}
_FACT_RE = {name: re.compile(rf"^[ \t]*{label}:[ \t]*(\S.*?)[ \t]*$", re.MULTILINE) for name, label in FACTS.items()}


@dataclass(frozen=True)
class RoleMarker:
    role: str
    loop: int
    attempt: int | None


def role_marker(role: str, loop: int, attempt: int) -> str:
    return _MARKER.format(role=role, loop=loop, attempt=attempt)


def find_role_marker(text: str) -> RoleMarker | None:
    match = _MARKER_RE.search(text)
    return RoleMarker(match[1], int(match[2]), int(match[3]) if match[3] else None) if match else None


def fact_line(name: str, value: object) -> str:
    """`Candidate id: loop-0001-…` and the like, one fact on its own line."""
    return f"{FACTS[name]}: {value}"


def find_fact(name: str, text: str) -> str | None:
    match = _FACT_RE[name].search(text)
    return match[1] if match else None
