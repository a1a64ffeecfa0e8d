"""Run one role to a valid output: freeze its inputs, call the harness, guard, validate, re-ask.

Every attempt leaves `prompt.md`, `inputs.json` (paths + sha256 of what the role was given),
the raw `events.jsonl`/`stderr.log`, and `result.json` (harness outcome, violations, errors)
in its own directory, whether it succeeded or not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import PolicyConfig, TimeoutsConfig
from ..fsutil import atomic_write_json, atomic_write_text, sha256_file
from ..harness.base import HarnessAdapter, Outcome, RoleRequest, Usage
from ..harness.process import start_ticks
from ..paths import WorkspacePaths
from . import events as ev
from .guard import Area, Guard
from .journal import Journal
from .prompts import template
from .validate import Expectations, validate_output


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


@dataclass
class RoleResult:
    output: dict[str, Any] | None
    attempts: int
    errors: list[str]
    usage: Usage


class RoleRunner:
    def __init__(self, paths: WorkspacePaths, adapter: HarnessAdapter, journal: Journal, *, policy: PolicyConfig,
                 timeouts: TimeoutsConfig, home: Path, notify: Callable[..., None] = lambda *a, **k: None,
                 sleep: Callable[[float], None] = time.sleep):
        self.paths, self.adapter, self.journal, self.home = paths, adapter, journal, home
        self.max_retries, self.wall_timeout, self.idle_timeout = policy.max_retries, timeouts.wall_seconds, timeouts.idle_seconds
        first = policy.transient_backoff_seconds
        self.backoff = tuple(first * 4 ** n for n in range(policy.transient_retries))
        self.notify, self.sleep = notify, sleep

    def manifest(self, job: RoleJob, attempt: int) -> dict[str, Any]:
        return {
            "schema_version": 1, "role": job.role, "loop": job.loop, "attempt": attempt,
            "files": [{"path": self.paths.rel(p), "sha256": sha256_file(p)} for p in job.inputs],
            "project": job.project,
            "workdir": self.paths.rel(job.workdir),
            "writable": [self.paths.rel(p) for p in ((job.workdir,) if job.access == "write" else ()) + job.writable],
            "read_only": ["spec.md", "state/"] + ([] if job.access == "write" else [self.paths.rel(job.workdir)]),
            "mechanisms": job.mechanisms,
        }

    def run(self, job: RoleJob) -> RoleResult:
        first_prompt = template(job.role).render(role=job.role, attempt=1, **job.prompt_values)
        errors: list[str] = []
        usage = Usage()
        session: str | None = None
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            attempt_dir = self.paths.loop(job.loop).attempt_dir(job.role, attempt)
            attempt_dir.mkdir(parents=True, exist_ok=True)
            if attempt == 1:
                prompt = first_prompt
            else:
                prompt = template("retry").render(role=job.role, loop=job.loop, attempt=attempt, errors=errors,
                                                  resumed=session is not None, original_prompt=first_prompt)
            if job.before_attempt:
                job.before_attempt(session is not None)
            atomic_write_text(attempt_dir / "prompt.md", prompt)
            atomic_write_json(attempt_dir / "inputs.json", self.manifest(job, attempt))
            self.journal.append(ev.AttemptStarted(loop=job.loop, role=job.role, attempt=attempt))
            self.notify("attempt", role=job.role, loop=job.loop, attempt=attempt)

            request = RoleRequest(
                role=job.role, loop=job.loop, attempt=attempt, prompt=prompt, workdir=job.workdir,
                access=job.access, writable=job.writable, home=self.home / job.role, wall_timeout=self.wall_timeout,
                idle_timeout=self.idle_timeout, resume_session=session, context=job.context)
            request.home.mkdir(parents=True, exist_ok=True)  # the role's own; its parents are guarded
            guard = Guard(job.protected(attempt_dir))
            result = self._call(request, attempt_dir)
            violations = guard.check_and_restore()
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
                "violations": [{"area": v.area, "changes": v.changes} for v in violations], "errors": errors})
            self.journal.append(ev.AttemptFinished(loop=job.loop, role=job.role, attempt=attempt, ok=ok,
                                                   outcome=result.outcome.value, errors=errors,
                                                   usage=result.usage.to_json(), violations=len(violations),
                                                   seconds=result.duration_s))
            if ok:
                return RoleResult(output, attempt, [], usage)
            resumable = self.adapter.supports_resume and result.outcome is Outcome.ok and not violations
            session = result.session_id if resumable else None
        return RoleResult(None, attempts, errors, usage)

    def _call(self, request: RoleRequest, attempt_dir: Path):
        """One harness run; transient failures (rate limit, network) are retried with backoff first."""
        def spawned(pid: int) -> None:
            self.journal.append(ev.ProcessStarted(loop=request.loop, role=request.role, attempt=request.attempt,
                                                  pid=pid, start_ticks=start_ticks(pid)))

        for n, delay in enumerate((*self.backoff, None), 1):
            result = self.adapter.run(request, attempt_dir, on_spawn=spawned)
            if not result.outcome.transient or delay is None:
                return result
            for log in ("events.jsonl", "stderr.log"):  # keep the failed run's logs beside the rerun's
                if (attempt_dir / log).exists():
                    (attempt_dir / log).rename(attempt_dir / log.replace(".", f".transient-{n}.", 1))
            self.journal.append(ev.TransientFailure(loop=request.loop, role=request.role, attempt=request.attempt,
                                                    outcome=result.outcome.value, error=result.error, retry_in=delay))
            self.sleep(delay)
        return result
