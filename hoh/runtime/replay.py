"""Running executable checks: admission of QA's new checks and the replay of the register, model-free.

A check runs where QA ran (QA's executor: this machine's jail, or QA's environment), on the read-only copy
of the frozen candidate, with no network unless QA had the machine's own, an empty /tmp, the role limits
and the check's own timeout; its `env` is set there, over hoh's few variables, and never where bwrap or an
environment's client runs (a name that could change what runs is refused: `evidence.checks.env_problems`). Each run leaves one text file (command, exit code, expectation, the reason of
a mismatch, its output) that is the evidence the ledger cites. Nothing a check prints is executed or
trusted beyond being compared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..envs.base import Execution, Executor, Launch, Queued
from ..evidence.checks import CheckRegister, CheckSpec, RunStatus, env_problems, mismatch
from ..fsutil import note_written
from ..harness.attempt import RoleRequest
from ..harness.sandbox import JailSpec, Limits, Network
from ..records import CheckResult, QaReport

MAX_CHECK_OUTPUT = 4 * 2**20
"""What one run may print before it is stopped (a check is a probe, not a build)."""
SHOWN_OUTPUT = 32 * 1024
"""Of each stream, in the run's evidence file."""


@dataclass(frozen=True)
class CheckRun:
    status: RunStatus
    exit_code: int | None
    seconds: float
    reason: str | None = None


@dataclass(frozen=True)
class ReplayResult:
    id: str
    behaviour_id: str | None
    status: RunStatus
    seconds: float
    at_risk: bool
    reason: str | None = None
    evidence: str | None = None
    """The run's text file, relative to state/."""

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["status"] = self.status.value
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ReplayResult":
        return cls(data["id"], data.get("behaviour_id"), RunStatus(data["status"]), data["seconds"],
                   data.get("at_risk", False), data.get("reason"), data.get("evidence"))


@dataclass(frozen=True)
class Replay:
    """`loops/NNNN/replay.json`: the register's checks run on one candidate, before its QA."""

    loop: int
    candidate_id: str
    results: tuple[ReplayResult, ...] = ()
    seconds: float = 0.0
    budget_s: float | None = None

    def count(self, *statuses: RunStatus) -> int:
        return sum(1 for r in self.results if r.status in statuses)

    @property
    def figures(self) -> dict[str, Any]:
        return {"replayed": len(self.results) - self.count(RunStatus.skipped),
                "failed": self.count(RunStatus.failed, RunStatus.timed_out, RunStatus.error),
                "flaky": self.count(RunStatus.flaky), "skipped": self.count(RunStatus.skipped),
                "at_risk": [r.id for r in self.results if r.at_risk], "seconds": self.seconds}

    def broken(self) -> list[ReplayResult]:
        """The regressions this replay shows (a flaky or skipped check is none; a check that could not run is
        not evidence against the candidate)."""
        return [r for r in self.results if r.status.broken]

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, "loop": self.loop, "candidate_id": self.candidate_id, "seconds": self.seconds,
                "budget_s": self.budget_s, "results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Replay":
        return cls(data["loop"], data["candidate_id"], tuple(ReplayResult.from_json(r) for r in data["results"]),
                   data.get("seconds", 0.0), data.get("budget_s"))


@dataclass(frozen=True)
class Admission:
    """One check QA attached, and whether the Runtime kept it."""

    item: str
    """The criterion or preserved behaviour it was attached to."""
    kind: str
    """criterion | preserved."""
    admitted: bool
    reason: str | None
    spec: dict[str, Any]
    check_id: str | None = None
    evidence: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Admission":
        return cls(**{f.name: data.get(f.name, f.default) for f in dataclasses.fields(cls)})


class CheckRunner:
    """Runs checks on one candidate view with QA's executor and QA's jail (network per check)."""

    def __init__(self, executor: Executor, jail: JailSpec | None, limits: Limits, scratch: Path):
        self.executor, self.jail, self.limits, self.scratch = executor, jail, limits, scratch
        self.unjailed_runs = 0
        """Runs with no jail (`sandbox.mode: off`): the view may have been written, so it is rebuilt."""
        self.runs = 0
        """Every run so far (an environment's executor leaves the view's stat data changed: `CheckSteps`)."""

    def run(self, spec: CheckSpec, view: Path, network: str, out: Path, stdin_root: Path) -> CheckRun:
        """Run once; write the evidence file `out`."""
        run = self.run_many([Check(spec, network, out)], view, stdin_root)[0]
        assert run is not None, "no deadline: it ran"
        return run

    def run_many(self, checks: Sequence["Check"], view: Path, stdin_root: Path,
                 deadline: float | None = None) -> list[CheckRun | None]:
        """Each check once, in order, each writing its evidence file; None for each not started because the
        monotonic `deadline` had passed. The executor may run them all in one call (`Executor.execute_many`)."""
        done: list[CheckRun | None] = [None] * len(checks)
        queued: list[tuple[int, Queued]] = []
        self.scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="checks-", dir=self.scratch) as tmp:
            for i, check in enumerate(checks):
                prepared = self._prepared(check, view, stdin_root, Path(tmp) / str(i))
                if isinstance(prepared, CheckRun):
                    done[i] = prepared
                else:
                    queued.append((i, prepared))
            self.runs += len(queued)
            ran = self.executor.execute_many([q for _, q in queued], deadline) if queued else []
            for (i, q), execution in zip(queued, ran):
                if execution is not None:
                    done[i] = _judged(checks[i], execution, q.attempt_dir)
        return done

    def _prepared(self, check: "Check", view: Path, stdin_root: Path, run_dir: Path) -> "CheckRun | Queued":
        """The check's run as its executor takes it; a CheckRun (an error, its evidence written) when it cannot."""
        spec = check.spec
        # A check's env is applied in its jail only, and a name no check may set is refused wherever it comes
        # from: QA is asked again for it, and one written into the register by hand is this run's error.
        env_problem = "; ".join(env_problems(spec.env)) or None
        problem, stdin = (env_problem, None) if env_problem else _stdin_of(spec, stdin_root)
        cwd = (view / spec.cwd).resolve()
        if problem is None and (not cwd.is_relative_to(view.resolve()) or not cwd.is_dir()):
            problem = f"its cwd '{spec.cwd}' is not a directory of the candidate"
        if problem is not None:
            _write_evidence(check.out, spec, None, "", "", RunStatus.error, problem)
            return CheckRun(RunStatus.error, None, 0.0, problem)
        jail = None
        if self.jail is not None:
            # QA's read-only paths (the tools `sandbox.read_only_paths` adds) and this view; nothing writable.
            shown = tuple(dict.fromkeys((*self.jail.read_only, view)))
            jail = JailSpec(read_only=shown, hidden=self.jail.hidden, tmp_bytes=self.jail.tmp_bytes,
                            network=Network.shared if check.network == Network.shared.value else Network.none)
        else:
            self.unjailed_runs += 1
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/tmp", "TMPDIR": "/tmp",
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **spec.env}
        request = RoleRequest(role="qa", loop=0, attempt=1, prompt="", workdir=view, access="read-only",
                              wall_timeout=spec.timeout_s, idle_timeout=spec.timeout_s,
                              max_output_bytes=MAX_CHECK_OUTPUT, jail=jail, limits=self.limits)
        run_dir.mkdir()
        return Queued(Launch(["bash", "-c", spec.command], cwd, env, stdin, jail), request, run_dir)


@dataclass(frozen=True)
class Check:
    """One run of a check: how, with which network, and where its evidence file goes."""

    spec: CheckSpec
    network: str
    out: Path


def _judged(check: Check, done: Execution, run_dir: Path) -> CheckRun:
    """The run's status from how it ended, and its evidence file written."""
    spec, proc = check.spec, done.process
    stdout, stderr = _read(run_dir / "events.jsonl"), _read(run_dir / "stderr.log")
    if done.setup_error or proc.spawn_error:
        status, reason = RunStatus.error, done.setup_error or proc.spawn_error
    elif proc.timed_out == "output":
        status, reason = RunStatus.failed, f"it printed more than {MAX_CHECK_OUTPUT // 2**20} MiB"
    elif proc.timed_out:
        status, reason = RunStatus.timed_out, f"it did not finish within its timeout of {spec.timeout_s:g}s"
    else:
        reason = mismatch(spec.expect, proc.exit_code, stdout, stderr)
        status = RunStatus.failed if reason else RunStatus.passed
    _write_evidence(check.out, spec, proc.exit_code, stdout, stderr, status, reason)
    return CheckRun(status, proc.exit_code, round(proc.duration_s, 3), reason)


def _stdin_of(spec: CheckSpec, root: Path) -> tuple[str | None, bytes | None]:
    if spec.stdin is not None:
        return None, spec.stdin.encode()
    if spec.stdin_file is None:
        return None, None
    path = root / spec.stdin_file
    if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(root.resolve()):
        return f"its stdin_file '{spec.stdin_file}' is not a regular file in the evidence dir", None
    return None, path.read_bytes()


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _shown(text: str) -> str:
    if len(text) <= SHOWN_OUTPUT:
        return text
    half = SHOWN_OUTPUT // 2
    return f"{text[:half]}\n[… {len(text) - SHOWN_OUTPUT} characters left out …]\n{text[-half:]}"


def _write_evidence(out: Path, spec: CheckSpec, exit_code: int | None, stdout: str, stderr: str,
                    status: RunStatus, reason: str | None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    expect = spec.expect
    lines = [f"$ {spec.command}", f"cwd: {spec.cwd}", f"exit code: {exit_code} (expected {expect.exit_code})",
             f"match: {expect.match.value}"]
    for name in ("stdout", "stderr"):
        if (want := getattr(expect, name)) is not None:
            lines.append(f"expected {name}: {want!r}")
    lines += [f"result: {status.value}" + (f": {reason}" if reason else ""),
              "--- stdout ---", _shown(stdout), "--- stderr ---", _shown(stderr)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---- the two steps' work ------------------------------------------------------------------------------------
def replay_order(checks: list[dict[str, Any]], changed: set[str]) -> list[tuple[dict[str, Any], bool]]:
    """At-risk checks (their paths touched by the change) first, then the least recently replayed: when the
    budget cuts the replay short, the checks it skipped are the first of the next loop's."""
    marked = [(c, CheckSpec.from_json(c["spec"]).touched_by(changed)) for c in checks]
    return sorted(marked, key=lambda m: (not m[1], m[0].get("last_replayed", 0), m[0]["id"]))


def with_reruns(runner: CheckRunner, checks: list[Check], view: Path, stdin_root: Path,
                deadline: float | None = None) -> list[CheckRun | None]:
    """Each check once (`run_many`), then each that failed once more (its evidence beside the first's, as
    `.rerun.txt`): passing then, it is flaky, never a regression."""
    runs = runner.run_many(checks, view, stdin_root, deadline)
    failed = [i for i, run in enumerate(runs) if run is not None and run.status is RunStatus.failed]
    again = runner.run_many([dataclasses.replace(checks[i], out=checks[i].out.with_suffix(".rerun.txt"))
                             for i in failed], view, stdin_root)
    for i, rerun in zip(failed, again):
        first = runs[i]
        assert first is not None and rerun is not None
        status, reason = first.status, first.reason
        if rerun.status is RunStatus.passed:
            status, reason = RunStatus.flaky, f"failed ({reason}), then passed on a re-run"
        runs[i] = CheckRun(status, first.exit_code, round(first.seconds + rerun.seconds, 3), reason)
    return runs


def replay(runner: CheckRunner, register: CheckRegister, view: Path, state: Path, out_dir: Path, *, loop: int,
           candidate_id: str, changed: set[str], budget_s: float | None) -> Replay:
    """Every active check on the candidate in `view` that the budget leaves time for (`with_reruns`)."""
    started = time.monotonic()
    order = replay_order(register.active(), changed)
    checks = [Check(CheckSpec.from_json(c["spec"]), c.get("network", "none"), out_dir / f"{c['id']}.txt")
              for c, _ in order]
    runs = with_reruns(runner, checks, view, state, None if budget_s is None else started + budget_s)
    results = []
    for (check, at_risk), run, ran in zip(order, runs, checks):
        common = {"id": check["id"], "behaviour_id": check.get("behaviour_id"), "at_risk": at_risk}
        if run is None:
            results.append(ReplayResult(**common, status=RunStatus.skipped, seconds=0.0,
                                        reason=f"the loop's replay budget of {budget_s:g}s was spent"))
        else:
            results.append(ReplayResult(**common, status=run.status, seconds=run.seconds, reason=run.reason,
                                        evidence=str(ran.out.relative_to(state))))
    return Replay(loop, candidate_id, tuple(results), round(time.monotonic() - started, 3), budget_s)


def attached(qa: QaReport) -> Iterable[tuple[str, CheckResult, dict[str, Any]]]:
    for kind, items in (("criterion", qa.criteria), ("preserved", qa.preserved)):
        for item in items:
            if item.check is not None:
                yield kind, item, item.check


def admit(runner: CheckRunner, register: CheckRegister, qa: QaReport, view: Path, evidence: Path, state: Path,
          out_dir: Path, network: str, budget_s: float | None = None) -> list[Admission]:
    """Run each check QA attached once more on the same candidate; keep those that show what QA saw. The replay
    budget bounds this too: QA cannot make a loop last days with checks that each take their longest. Twins
    (the same check on two items) run once."""
    items = []
    for kind, item, raw in attached(qa):
        spec = CheckSpec.from_json(raw)
        if spec.stdin_file is not None:
            # The check keeps the copy of QA's evidence that the loop's state holds, not QA's scratch file.
            spec = dataclasses.replace(spec, stdin_file=str((evidence / spec.stdin_file).relative_to(state)))
        items.append((kind, item, spec, json.dumps(spec.to_json(), sort_keys=True)))
    runnable: dict[str, int] = {}
    checks: list[Check] = []
    for _, item, spec, key in items:
        if item.verified and key not in runnable and register.same(spec) is None:
            runnable[key] = len(checks)
            checks.append(Check(spec, network, out_dir / f"{item.id}.txt"))
    deadline = None if budget_s is None else time.monotonic() + budget_s
    runs = runner.run_many(checks, view, state, deadline) if checks else []
    admissions: list[Admission] = []
    added: dict[str, str] = {}  # a check admitted here: its id
    counted: set[int] = set()
    for kind, item, spec, key in items:
        if (same := register.same(spec) or added.get(key)) is not None:
            admissions.append(Admission(item.id, kind, True, f"the register has this check already: {same}",
                                        spec.to_json(), same))
            continue
        if not item.verified:
            admissions.append(Admission(item.id, kind, False, f"QA reported {item.id} as {item.status}, so there "
                                        "is no observation for its check to reproduce", spec.to_json()))
            continue
        i = runnable[key]
        if (run := runs[i]) is None:
            admissions.append(Admission(item.id, kind, False, f"not run: the loop's check budget of {budget_s:g}s "
                                        "was spent on the checks before it", spec.to_json()))
            continue
        check_id = register.next_id(offset=len(added))
        reason = None if run.status is RunStatus.passed else \
            f"it did not reproduce QA's observation on the candidate: {run.reason}"
        if reason is None:
            added[key] = check_id
        admissions.append(Admission(item.id, kind, reason is None, reason, spec.to_json(),
                                    check_id if reason is None else None, str(checks[i].out.relative_to(state)),
                                    0.0 if i in counted else run.seconds))
        counted.add(i)
    return admissions


def clear(directory: Path) -> None:
    """An empty dir for a step's run files, noted as hoh's own write (the guard between roles puts back the rest)."""
    note_written(directory)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
