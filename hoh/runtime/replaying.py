"""The register's checks replayed on a past loop's candidate, outside any run: `hoh replay` and its bisection.

Read-only on the workspace: no lock is taken (a live run may go on), and nothing is written there. Each
candidate is exported from history.git into a temporary directory outside the workspace, through an index
of its own (`History.export` keeps its index in history.git); the checks run on it as the Runtime runs them
(`CheckRunner`: this machine's jail, or none with `sandbox.mode: off`), and their evidence files land in
that directory, which is removed at the end. A failure is re-run, as in a loop's replay, so a flaky
check is told apart from a broken one.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..envs.registry import replay_place, stop_replay_place
from ..errors import HohError, UsageError
from ..evidence.checks import CheckRegister, CheckSpec, RunStatus
from ..harness.sandbox import JailSpec
from ..records import Candidate, read_candidate
from ..store.journal import Journal, RunHistory
from ..store.workspace import Workspace
from .replay import Check, CheckRunner, Replay, ReplayResult, with_reruns
from .setup import role_adapters, role_limits


@dataclass(frozen=True)
class Bisection:
    """Where one check starts to fail, over the loops from the one that added it to the last finished one."""

    check_id: str
    first: int
    last: int
    failing: Candidate | None = None
    """The first loop's candidate that fails the check; None when it passes on every loop."""
    passing: int | None = None
    """The loop before it (with a candidate), on which the check passes."""
    reason: str | None = None
    """Why it fails there."""
    runs: tuple[tuple[int, RunStatus], ...] = ()
    """The loops the search ran the check on, in order."""

    def to_json(self) -> dict[str, Any]:
        return {"check_id": self.check_id, "first": self.first, "last": self.last,
                "first_failing_loop": self.failing.loop if self.failing else None,
                "candidate_id": self.failing.candidate_id if self.failing else None,
                "passes_at_loop": self.passing, "reason": self.reason,
                "runs": [{"loop": t, "status": s.value} for t, s in self.runs]}


class PastReplay:
    """One workspace's register and candidates, and a temporary directory to run checks in (a context manager)."""

    def __init__(self, ws: Workspace, where: str | None = None, warn: Callable[[str], None] = lambda m: None):
        """`where`: the environment the checks run in (`local`, `docker`, …); the workspace's own by default."""
        self.ws, self.paths = ws, ws.paths
        self.register = CheckRegister.load(self.paths.checks)
        self.history = RunHistory.read(Journal(self.paths.journal))
        if (tmp := Path(tempfile.gettempdir()).resolve()).is_relative_to(self.paths.root.resolve()):
            raise UsageError(f"the temporary directory {tmp} lies inside the workspace; set TMPDIR elsewhere")
        self.tmp = Path(tempfile.mkdtemp(prefix="hoh-past-replay-"))
        sandbox = ws.config.sandbox
        jail = None if sandbox.mode == "off" else JailSpec(tmp_bytes=sandbox.limits.tmp_mb * 2**20)
        name = ws.config.environment.name if where is None else where
        hint = "" if where is not None else "; or replay on this machine with --env local"
        try:
            self.place = replay_place(ws.config, name, self.paths.root, self.tmp,
                                      lambda: role_adapters(ws.config)["qa"], warn, hint)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.runner = CheckRunner(self.place, jail, role_limits(ws.config), self.tmp / "scratch")
        self._views: dict[int, tuple[Path, int]] = {}

    def __enter__(self) -> "PastReplay":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            stop_replay_place(self.place)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- loops and candidates -----------------------------------------------------------------------------
    def candidate(self, t: int) -> Candidate | None:
        path = self.paths.loop(t).candidate
        return read_candidate(path) if path.is_file() else None

    def last_finished(self) -> int:
        """The last finished loop that froze a candidate."""
        for stats in reversed(self.history.loop_list()):
            if stats.status.finished and self.candidate(stats.loop) is not None:
                return stats.loop
        raise UsageError(f"{self.paths.root}: no finished loop has a candidate yet; nothing to replay")

    def loop_candidate(self, t: int) -> Candidate:
        if (found := self.candidate(t)) is None:
            have = [s.loop for s in self.history.loop_list() if self.candidate(s.loop) is not None]
            hint = f"loops with a candidate: {_ranges(have)}" if have else "no loop has a candidate yet"
            raise UsageError(f"loop {t} has no candidate in {self.paths.loops}; {hint}")
        return found

    def check(self, check_id: str) -> dict[str, Any]:
        if (check := self.register.get(check_id)) is None:
            known = [c["id"] for c in self.register.checks]
            hint = f"the register holds {known[0]}…{known[-1]}" if known else "the register holds no check yet"
            raise UsageError(f"no check {check_id} in {self.paths.checks}; {hint}")
        return check

    # ---- runs -----------------------------------------------------------------------------------------------
    def _view(self, candidate: Candidate) -> Path:
        """The candidate as plain files; made again after an unjailed run, which may have written it."""
        cached = self._views.get(candidate.loop)
        if cached is not None and cached[1] == self.runner.unjailed_runs:
            return cached[0]
        view = Path(tempfile.mkdtemp(prefix=f"loop-{candidate.loop:04d}-", dir=self.tmp)) / "candidate"
        view.mkdir()
        repo = self.ws.history
        index = view.parent / "index"
        repo.git("read-tree", candidate.commit, work_tree=view, index=index)
        repo.git("checkout-index", "--all", "--force", work_tree=view, index=index)
        index.unlink()
        self._views[candidate.loop] = (view, self.runner.unjailed_runs)
        return view

    def run(self, check: dict[str, Any], candidate: Candidate) -> ReplayResult:
        """One check on one candidate, and again if it failed (flaky or broken)."""
        return self.run_all([check], candidate)[0]

    def run_all(self, checks: list[dict[str, Any]], candidate: Candidate) -> tuple[ReplayResult, ...]:
        """The checks on one candidate, each that failed once more (`replay.with_reruns`)."""
        out = self.tmp / "evidence" / f"{candidate.loop:04d}"
        runs = with_reruns(self.runner, [Check(CheckSpec.from_json(c["spec"]), c.get("network", "none"),
                                               out / f"{c['id']}.txt") for c in checks],
                           self._view(candidate), self.paths.state)
        return tuple(ReplayResult(c["id"], c.get("behaviour_id"), run.status, run.seconds, False, run.reason)
                     for c, run in zip(checks, runs) if run is not None)

    def replay(self, t: int) -> Replay:
        """Every active check of the register on loop t's candidate."""
        candidate = self.loop_candidate(t)
        started = time.monotonic()
        results = self.run_all(sorted(self.register.active(), key=lambda c: c["id"]), candidate)
        return Replay(t, candidate.candidate_id, results, round(time.monotonic() - started, 3))

    def bisect(self, check_id: str) -> Bisection:
        """The first loop whose candidate fails the check. It passed on its own loop's candidate when it was
        admitted. When the last loop fails too, a binary search finds a boundary (and runs the loop before it,
        should the search only have assumed it passes); when the last loop passes, a regression may have been
        fixed since, which no binary search can see, so the loops are run in order until one fails."""
        check = self.check(check_id)
        added = int(check.get("added", {}).get("loop", 1))
        last = self.last_finished()
        loops = [t for t in range(added, last + 1) if self.candidate(t) is not None]
        if not loops:
            raise UsageError(f"{check_id} was added in loop {added}, after the last finished loop ({last})")
        runs: list[tuple[int, RunStatus]] = []
        results: dict[int, ReplayResult] = {}

        def broken(i: int) -> bool:
            t = loops[i]
            if t not in results:
                results[t] = result = self.run(check, self.candidate(t))
                runs.append((t, result.status))
                if result.status is RunStatus.error:
                    raise HohError(f"{check_id} could not run on loop {t}'s candidate: {result.reason}")
            return results[t].status.broken

        if len(loops) > 1 and broken(len(loops) - 1):
            good, bad = 0, len(loops) - 1  # loops[good] passes (assumed until run), loops[bad] fails
            while bad - good > 1:
                mid = (good + bad) // 2
                good, bad = (good, mid) if broken(mid) else (mid, bad)
            if broken(good):
                bad = good  # it fails on the very loop that added it, here and now
        else:
            bad = next((i for i in range(len(loops)) if broken(i)), None)
        if bad is None:
            return Bisection(check_id, loops[0], loops[-1], runs=tuple(runs))
        failing = self.candidate(loops[bad])
        return Bisection(check_id, loops[0], loops[-1], failing, loops[bad - 1] if bad else None,
                         results[loops[bad]].reason, tuple(runs))


def _ranges(loops: list[int]) -> str:
    """1-3, 5, 7-9."""
    spans: list[list[int]] = []
    for t in loops:
        if spans and t == spans[-1][1] + 1:
            spans[-1][1] = t
        else:
            spans.append([t, t])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)
