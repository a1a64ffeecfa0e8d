"""How one attempt's view goes into its environment and its writable paths come back: afresh every attempt
(`transfer.py`), or, where the environment keeps the view between attempts, only what changed (`sync.py`); and
the shell steps that gather them there after the CLI's end."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..store.hashcache import HashCache
from . import supervise, sync, transfer
from .channel import inside
from .viewwatch import ViewWatch

VIEW = "view"
"""Where a kept view's plan is staged, under the attempt's incoming directory."""


@dataclass
class Move:
    attempt: supervise.Attempt
    roots: list[Path]
    writable: list[Path]
    hidden: tuple[Path, ...]
    held: sync.Held | None
    """What the environment keeps of the view; None: it gets a fresh copy."""
    cache: HashCache
    views: ViewWatch | None = None
    """hoh's side of the view, listed for what changed (`viewwatch.py`); None: listed whole."""
    wanted: dict[str, sync.Entry] = field(default_factory=dict)
    moved_in: int = 0
    """Bytes of the role's view sent in."""
    moved_out: int = 0

    def stage(self, staging: Path) -> list[str]:
        """Stage the view; returns the paths the supervisor moves into place (a fresh copy's roots)."""
        if self.held is None:
            self.moved_in = transfer.stage(self.roots, self.hidden, staging)
            return [str(r) for r in self.roots if len(r.parts) > 2]
        listed = self.views.entries(self.roots, self.hidden) if self.views is not None else None
        self.wanted, self.moved_in = sync.plan(self.roots, self.hidden, self.held, self.cache, staging / VIEW, listed)
        return []

    def place_args(self) -> list[str] | None:
        """`inside.py place`'s arguments; None for a fresh copy."""
        if self.held is None:
            return None
        return [f"{self.attempt.incoming}/{VIEW}", self.held.digest]

    def collect_command(self) -> str:
        assert self.held is not None
        return inside("collect", f"{self.attempt.outgoing}/writable", self.held.digest, *map(str, self.writable))

    def collect_steps(self, max_output: int, keep: supervise.Keep | None) -> str:
        """The steps that gather, after the attempt, what comes back (`supervise.py`)."""
        if self.held is not None:
            return change_steps(self.attempt, self.collect_command(), max_output, keep)
        return copy_steps(self.attempt, [str(w.resolve()) for w in self.writable], max_output, keep)

    def gather(self, max_output: int, keep: supervise.Keep) -> dict:
        """What `inside.py attempt` collects after the CLI's end, as `collect_steps` and `collect_command` do:
        its steps (the streams, a fresh copy's writable paths), and for a kept view, where and what to list."""
        if self.held is None:
            return {"steps": self.collect_steps(max_output, keep), "roots": None, "out": None,
                    "outgoing": self.attempt.outgoing}
        return {"steps": stream_steps(self.attempt, max_output, keep), "roots": list(map(str, self.writable)),
                "out": f"{self.attempt.outgoing}/writable", "outgoing": self.attempt.outgoing,
                "keep": list(map(str, keep))}

    def placed(self, report: dict) -> list[str]:
        assert self.held is not None
        return sync.placed(self.held, report, self.wanted)

    def keep_for(self, path: Path) -> list[Path]:
        return [h for h in self.hidden if h.resolve().is_relative_to(path.resolve())]

    def adopt_copies(self, copies: Iterable[Path]) -> None:
        for path, copy in zip(self.writable, copies):
            self.moved_out += transfer.adopt(copy, path, keep=self.keep_for(path))[1]

    def adopt_changes(self, came: Path, report: dict) -> list[str]:
        """What `inside.py collect` listed, applied here; the record is believed only when it said so."""
        assert self.held is not None
        files = came / "writable" / "files"
        self.moved_out = sum(p.stat().st_size for p in files.iterdir()) if files.is_dir() else 0
        keep = [k for w in self.writable for k in self.keep_for(w)]
        dropped = sync.apply(came / "writable" / "changes.jsonl", files, self.writable, keep, self.held)
        self.held.digest = report["held"] if report.get("believed") else "-"
        if not report.get("believed"):
            self.held.entries = {}
        shutil.rmtree(files, ignore_errors=True)
        return dropped


def _stream_steps(attempt: supervise.Attempt, max_output: int, keep: supervise.Keep | None) -> list[str]:
    """Kill the attempt's session (and, `keep` given, every process but those), then cut both streams out."""
    q, out = shlex.quote, attempt.outgoing
    swept = [supervise.sweep(keep, empty_tmp=False, ended=attempt)] if keep is not None else []
    steps = [supervise.signal_session(attempt, "KILL"), *swept, f"mkdir -p {q(out)}/streams {q(out)}/writable"]
    return steps + [f"head -c {max_output} {q(attempt.file(src))} > {q(out)}/streams/{dest} 2>/dev/null"
                    for src, dest in (("stdout", "events.jsonl"), ("stderr", "stderr.log"))]


def copy_steps(attempt: supervise.Attempt, writable: list[str], max_output: int,
               keep: supervise.Keep | None) -> str:
    """Kill what the attempt left running (`keep`: all but those processes), then gather, for one copy out, both
    streams (each cut at the output cap first: a flood stays in the environment) and the writable paths, as
    `outgoing/streams` and `outgoing/writable/<n>`."""
    q, out = shlex.quote, attempt.outgoing
    steps = _stream_steps(attempt, max_output, keep)
    # Hard links: the copy out reads them once; nothing in the environment runs any more.
    steps += [f"mkdir -p {q(out)}/writable/{n} && {{ [ ! -d {q(w)} ] || cp -al {q(w)}/. {q(out)}/writable/{n}/ "
              f"2>/dev/null || cp -a {q(w)}/. {q(out)}/writable/{n}/; }}" for n, w in enumerate(writable)]
    return "; ".join(steps) + "; true"


def stream_steps(attempt: supervise.Attempt, max_output: int, keep: supervise.Keep | None) -> str:
    """Kill what the attempt left running and gather both streams (`copy_steps` less the writable paths)."""
    return "; ".join(_stream_steps(attempt, max_output, keep))


def change_steps(attempt: supervise.Attempt, changes: str, max_output: int, keep: supervise.Keep | None) -> str:
    """As `copy_steps`, with what changed in the writable paths as `inside.py collect` (`changes`, the command,
    writing into `outgoing/writable`) lists it: `changes.jsonl` and `files/`, and its `collected=` line."""
    return f"{stream_steps(attempt, max_output, keep)}; {changes}"
