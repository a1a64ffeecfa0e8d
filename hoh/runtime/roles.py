"""Run one role to a valid output: freeze its inputs, call the harness, guard, validate, re-ask.

Every attempt leaves `prompt.md`, `inputs.json` (paths + sha256 of what the role was given),
the raw `events.jsonl`/`stderr.log`, and `result.json` (harness outcome, violations, errors)
in its own directory, whether it succeeded or not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import PolicyConfig, TimeoutsConfig
from ..envs.attempt import run_attempt
from ..envs.base import Executor
from ..envs.local.executor import LOCAL
from ..errors import QuotaExhausted, RunEnded
from ..fsutil import atomic_write_json, atomic_write_text, sha256_file
from ..harness.attempt import HarnessResult, Outcome, RoleRequest
from ..harness.base import HarnessAdapter
from ..harness.process import start_ticks
from ..harness.quota import reset_time
from ..harness.sandbox import JailSpec, Limits
from ..paths import WorkspacePaths
from ..store import events as ev
from ..store.changefeed import ScanReason
from ..store.journal import Journal
from ..usage import Usage
from .between import Continuity
from .guard import Area, Guard, WorkTreeArea
from .prompts import template
from .validate import Expectations, RoleOutput, validate_output


@dataclass
class RoleJob:
    """Everything the Runtime fixed for one role in one loop."""

    role: str
    loop: int
    prompt_values: dict[str, Any]
    workdir: Path
    access: str
    expectations: Expectations
    inputs: list[Path]
    """Files the role is given; recorded with their sha256."""
    project: dict[str, str] | None
    """The project state the role sees: commit and tree."""
    protected: Callable[[Path], list[Area]]
    """Areas the role may not write, given the active attempt dir (excluded from state/)."""
    writable: tuple[Path, ...] = ()
    context: dict[str, Any] = field(default_factory=dict)
    mechanisms: dict[str, bool] = field(default_factory=dict)
    before_attempt: Callable[[bool], None] | None = None
    """Called before each attempt with whether it resumes the CLI session."""
    jail: JailSpec | None = None
    """The OS jail of every attempt (the role's own harness home is added writable); None: no jail."""
    package: str | None = None
    """A work package's Developer (`P1`, or `merge-P2` for a conflict's merge), working beside others."""
    digest: Callable[[Path], str] = sha256_file
    """An input's sha256 for inputs.json (the run's hash cache, which the guard reads next, where one thread runs)."""

    @property
    def role_dir_name(self) -> str:
        """Its attempts' dir under the loop's roles/: the role, or `developer-P1` for a package's Developer."""
        return f"{self.role}-{self.package}" if self.package else self.role


@dataclass
class RoleResult:
    output: RoleOutput | None
    attempts: int
    errors: list[str]
    usage: Usage


QUOTA_GUESS_SECONDS = 3600.0
"""How long to wait for a usage limit whose message names no reset time, before trying again."""


class RoleRunner:
    """Runs each role on its own adapter (`roles.<role>.*` may give each role its own harness and model).

    `gate(role)` is called before every attempt and may raise `RunEnded` (a budget, a stop request);
    `stop_requested()` is polled while the run waits for a usage limit to reset."""

    def __init__(self, paths: WorkspacePaths, adapters: Mapping[str, HarnessAdapter], journal: Journal, *,
                 policy: PolicyConfig, timeouts: TimeoutsConfig, notify: Callable[..., None] = lambda *a, **k: None,
                 sleep: Callable[[float], None] = time.sleep, gate: Callable[[str], None] = lambda role: None,
                 stop_requested: Callable[[], RunEnded | None] = lambda: None, clock: Callable[[], float] = time.time,
                 limits: Limits = Limits(), executors: Mapping[str, Executor] | None = None):
        self.paths, self.adapters, self.journal = paths, adapters, journal
        self.max_retries, self.wall_timeout, self.idle_timeout = policy.max_retries, timeouts.wall_seconds, timeouts.idle_seconds
        self.max_output = int(timeouts.max_output_mb * 2**20)
        first = policy.transient_backoff_seconds
        self.backoff = tuple(first * 4 ** n for n in range(policy.transient_retries))
        self.max_quota_wait = policy.max_quota_wait_hours * 3600
        self.notify, self.sleep, self.gate, self.stop_requested, self.clock = notify, sleep, gate, stop_requested, clock
        self.limits = limits
        self.executors = executors or {}
        """Where each role's attempts run (this machine's jail when a role has none here)."""
        self.continuity = Continuity()

    def home(self, role: str, package: str | None = None) -> Path:
        """The role's own config home, under its harness's (the jail hides the other roles'); a package's
        Developer has its own, beside the others that run at once."""
        return self.paths.harness_home(self.adapters[role].name) / (f"{role}-{package}" if package else role)

    def manifest(self, job: RoleJob, attempt: int) -> dict[str, Any]:
        adapter = self.adapters[job.role]
        return {
            "schema_version": 1, "role": job.role, "loop": job.loop, "attempt": attempt,
            "files": [{"path": self.paths.rel(p), "sha256": job.digest(p)} for p in job.inputs],
            "project": job.project,
            "workdir": self.paths.rel(job.workdir),
            "writable": [self.paths.rel(p) for p in ((job.workdir,) if job.access == "write" else ()) + job.writable],
            "read_only": ["spec.md", "state/"] + ([] if job.access == "write" else [self.paths.rel(job.workdir)]),
            "mechanisms": job.mechanisms,
            **({"package": job.package} if job.package else {}),
            # Which CLI ran the attempt, recorded before it starts: a transcript reader (`hoh.transcript`) needs
            # it to read a live stream, and hoh.yaml may name another harness by the time anyone reads it.
            "harness": adapter.name, "model": adapter.config.model,
        }

    def run(self, job: RoleJob) -> RoleResult:
        first_prompt = template(job.role).render(role=job.role, attempt=1, **job.prompt_values)
        errors: list[str] = []
        usage = Usage()
        session: str | None = None
        attempts = self.max_retries + 1
        adapter = self.adapters[job.role]
        for attempt in range(1, attempts + 1):
            self.gate(job.role)
            attempt_dir = self.paths.loop(job.loop).attempt_dir(job.role_dir_name, attempt)
            attempt_dir.mkdir(parents=True, exist_ok=True)
            if attempt == 1:
                prompt = first_prompt
            else:
                prompt = template("retry").render(role=job.role, loop=job.loop, attempt=attempt, errors=errors,
                                                  resumed=session is not None, original_prompt=first_prompt)
            if job.before_attempt:
                job.before_attempt(session is not None)
            # An attempt's own records are written whole but not fsynced, like the CLI's event stream beside
            # them: after a crash of the machine a resume never reads them (the role's step runs again from its
            # frozen inputs, its earlier attempts set aside), and the journal's lines keep its spend.
            atomic_write_text(attempt_dir / "prompt.md", prompt, durable=False)
            atomic_write_json(attempt_dir / "inputs.json", self.manifest(job, attempt), durable=False)
            self.journal.append(ev.AttemptStarted(loop=job.loop, role=job.role, attempt=attempt, package=job.package))
            # The events file and the adapter let live progress follow the attempt (its tokens, its last tool).
            self.notify("attempt", role=job.role, loop=job.loop, attempt=attempt,
                        events=attempt_dir / "events.jsonl", adapter=adapter, package=job.package)

            home = self.home(job.role, job.package)
            jail = replace(job.jail, writable=(*job.jail.writable, home)) if job.jail else None
            request = RoleRequest(
                role=job.role, loop=job.loop, attempt=attempt, prompt=prompt, workdir=job.workdir,
                access=job.access, writable=job.writable, home=home, wall_timeout=self.wall_timeout,
                idle_timeout=self.idle_timeout, max_output_bytes=self.max_output, resume_session=session,
                context=job.context, jail=jail, limits=self.limits, package=job.package)
            request.home.mkdir(parents=True, exist_ok=True)  # the role's own; its parents are guarded
            areas = job.protected(attempt_dir)
            for area in areas:
                if isinstance(area, WorkTreeArea):
                    # In an environment too: only the role's writable paths come back from it.
                    area.jailed = jail is not None and not jail.writes_into(area.work_tree)
            for found in self.continuity.check(areas):
                self.journal.append(ev.ViolationBetweenRoles(loop=job.loop, role=job.role_dir_name, area=found.area,
                                                             changes=found.changes))
            guard = Guard(areas)
            result, ended = self._call(adapter, request, attempt_dir)
            violations = guard.check_and_restore()
            self.continuity.remember(areas)
            for area in areas:
                if isinstance(area, WorkTreeArea) and area.scanned:
                    self.journal.append(ev.FullScan(loop=job.loop, step=job.role, area=area.name,
                                                    reason=ScanReason.no_jail.value))
            usage = usage + result.usage

            errors = [v.describe() for v in violations]
            output = None
            if result.outcome is not Outcome.ok:
                errors.append(f"harness outcome {result.outcome.value}: {result.error}")
            else:
                output, problems = validate_output(job.role, result.final_message, job.expectations)
                errors += problems
            ok = not errors
            atomic_write_json(attempt_dir / "result.json", {
                "schema_version": 1, "ok": ok, "harness": result.to_json(),
                "violations": [{"area": v.area, "changes": v.changes} for v in violations], "errors": errors},
                durable=False)
            self.journal.append(ev.AttemptFinished(loop=job.loop, role=job.role, attempt=attempt, ok=ok,
                                                   outcome=result.outcome.value, errors=errors,
                                                   usage=result.usage.to_json(), violations=len(violations),
                                                   seconds=result.duration_s, harness=adapter.name,
                                                   model=adapter.config.model, cost_source=result.cost_source,
                                                   package=job.package))
            self.notify("attempt_done", role=job.role, loop=job.loop, attempt=attempt, ok=ok,
                        outcome=result.outcome.value, seconds=result.duration_s, usage=result.usage,
                        tool_calls=result.tool_calls, errors=errors, package=job.package)
            if ended is not None:
                raise ended
            if ok:
                return RoleResult(output, attempt, [], usage)
            resumable = adapter.capabilities.resume and result.outcome is Outcome.ok and not violations
            session = result.session_id if resumable else None
        return RoleResult(None, attempts, errors, usage)

    def _call(self, adapter: HarnessAdapter, request: RoleRequest,
              attempt_dir: Path) -> tuple[HarnessResult, RunEnded | None]:
        """One attempt's harness run. Transient failures (rate limit, network) are rerun with backoff; a usage
        limit is waited out until its reset and rerun, unless the reset is too far or a stop is asked for
        meanwhile (then the attempt ends and the run with it). The usage of every rerun counts."""
        def spawned(pid: int) -> None:
            self.journal.append(ev.ProcessStarted(loop=request.loop, role=request.role, attempt=request.attempt,
                                                  pid=pid, start_ticks=start_ticks(pid), package=request.package))

        backoff, waited, reruns, usage = list(self.backoff), 0.0, {"transient": 0, "quota": 0}, Usage()
        while True:
            result = run_attempt(adapter, request, attempt_dir, self.executors.get(request.role, LOCAL), spawned)
            usage = usage + result.usage
            result = replace(result, usage=usage)
            if result.outcome is Outcome.quota_exhausted:
                now = self.clock()
                reset = reset_time(result.error or "")
                until = reset.timestamp() if reset is not None else now + QUOTA_GUESS_SECONDS
                if waited + max(0.0, until - now) > self.max_quota_wait:
                    return result, QuotaExhausted(
                        f"the {request.role}'s harness hit its usage limit ({result.error}); it resets after "
                        f"policy.max_quota_wait_hours={self.max_quota_wait / 3600:g} allows hoh to wait")
                self._set_aside(attempt_dir, "quota", reruns)
                self.journal.append(ev.QuotaWait(loop=request.loop, role=request.role, attempt=request.attempt,
                                                 until=round(until, 3), error=result.error, package=request.package))
                self.notify("paused", role=request.role, until=until, package=request.package)
                if stop := self._wait_until(until):
                    return result, stop
                waited += max(0.0, until - now)
            elif result.outcome.transient and backoff:
                delay = backoff.pop(0)
                self._set_aside(attempt_dir, "transient", reruns)
                self.journal.append(ev.TransientFailure(loop=request.loop, role=request.role, attempt=request.attempt,
                                                        outcome=result.outcome.value, error=result.error,
                                                        retry_in=delay, package=request.package))
                self.sleep(delay)
            else:
                return result, None

    @staticmethod
    def _set_aside(attempt_dir: Path, why: str, reruns: dict[str, int]) -> None:
        """Keep a failed run's logs beside the rerun's: events.transient-1.jsonl, stderr.quota-1.log."""
        reruns[why] += 1
        for log in ("events.jsonl", "stderr.log"):
            if (attempt_dir / log).exists():
                (attempt_dir / log).rename(attempt_dir / log.replace(".", f".{why}-{reruns[why]}.", 1))

    def _wait_until(self, until: float) -> RunEnded | None:
        """Sleep until `until` (epoch seconds) in short steps; a stop request ends the wait early."""
        while (left := until - self.clock()) > 0:
            if stop := self.stop_requested():
                return stop
            self.sleep(min(left, 1.0))
        return self.stop_requested()
