"""Harbor jobs as `hoh bench` runs them: a JobConfig file, `harbor run -c FILE`, and what it left.

Each job is a plain `harbor run -c CONFIG` of this Python's Harbor (`python -m harbor.cli.main`),
so the job dir is Harbor's own (`harbor view OUT/jobs` shows it); a job Harbor started before is
continued with `harbor job resume`: finished trials are kept, unfinished and cancelled ones rerun.
A job whose every trial finished is not started again at all, so an identical rerun of
`hoh bench run` is immediate.

The job's output goes to a log beside its config; when Harbor stops with an error, the error's
last line (Harbor's own message) is what the trial records show.

On Ctrl-C every Harbor is asked to stop as on its own Ctrl-C (it cancels its trials and takes their
environments down); one that has not stopped after STOP_GRACE is killed, and the Docker containers
of its trials that are still there are removed, so an interrupted run leaves none behind.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_json
from ..harness.process import call, inherited, run_process
from .results import JobFiles, last_error


@dataclass(frozen=True)
class JobOutcome:
    exit_code: int | None
    error: str | None
    """Harbor's own last error line when it stopped with an error; None when the job ran through."""


THIRD_PARTY_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""Set (unless the user set them) in hoh's process before Harbor is imported and in every Harbor's: LiteLLM
(Harbor's dependency) otherwise fetches its model cost map from the internet when first imported, which
offline prints four warnings and retries for seconds, and online makes costs depend on the day of the run;
its bundled map is the one of the installed version."""
STOP_GRACE = 180.0
"""After Harbor is asked to stop: how long it gets to cancel its trials (hoh's agent settles for up to 120 s,
then each environment is taken down) before its process group is killed."""
DOCKER_TIMEOUT = 60.0


class Running:
    """Process groups of the `harbor run`s in flight, so an interrupt can stop them (they are
    their own sessions and do not get the terminal's Ctrl-C), and the variables they all get
    beyond this process's environment (the --ae values, which are never written to a file)."""

    def __init__(self, env: dict[str, str] | None = None, grace: float = STOP_GRACE) -> None:
        self.env = dict(env or {})
        self.grace = grace
        self.pids: set[int] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.deadline: threading.Timer | None = None

    def add(self, pid: int) -> None:
        with self.lock:
            self.pids.add(pid)
        if self.stopping.is_set():
            self.stop()

    def discard(self, pid: int) -> None:
        with self.lock:
            self.pids.discard(pid)

    def stop(self) -> None:
        """Ask every running Harbor to stop as on Ctrl-C: it cancels its trials and writes what it has;
        those still running after the grace period are killed."""
        self.stopping.set()
        self.signal(signal.SIGINT)
        with self.lock:
            if self.deadline is None:
                self.deadline = threading.Timer(self.grace, self.signal, (signal.SIGKILL,))
                self.deadline.daemon = True
                self.deadline.start()

    def signal(self, sig: int) -> None:
        with self.lock:
            pids = list(self.pids)
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass


def compose_project(name: str) -> str:
    """Docker Compose's project name for a Harbor session id (Harbor's docker environment sanitizes it so)."""
    name = name.lower()
    name = name if re.match(r"[a-z0-9]", name) else "0" + name
    return re.sub(r"[^a-z0-9_-]", "-", name)


def remove_leftovers(job_dir: Path) -> list[str]:
    """Remove the Docker containers and networks of this job's trials that are still there: their compose
    projects are `TRIAL__env` (and `TRIAL__verifier__KEY` for separate verifiers), TRIAL a trial dir's name.
    Best effort, as Harbor's own `docker compose down` is: the ids removed."""
    prefixes = tuple(compose_project(d.name) + "__" for d in job_dir.iterdir() if d.is_dir()) \
        if job_dir.is_dir() else ()
    removed: list[str] = []
    if not prefixes:
        return removed
    for kind, remove in (("ps", ["rm", "-f"]), ("network", ["network", "rm"])):
        listing = ["ps", "-a"] if kind == "ps" else ["network", "ls"]
        found = _docker(*listing, "--filter", "label=com.docker.compose.project", "--format",
                        '{{.ID}} {{.Label "com.docker.compose.project"}}')
        ids = [line.split()[0] for line in found.splitlines()
               if len(line.split()) == 2 and line.split()[1].startswith(prefixes)]
        if ids:
            _docker(*remove, *ids)
            removed += ids
    return removed


def _docker(*args: str) -> str:
    try:
        return call(["docker", *args], env=docker_env(), timeout=DOCKER_TIMEOUT).stdout.decode(errors="replace")
    except OSError:
        return ""  # no docker CLI here: then there is nothing of ours to remove either


def docker_env() -> dict[str, str]:
    """What the docker CLI reads of the user's environment (its engine, config and proxies), and nothing else."""
    return inherited("PATH", "HOME", "XDG_RUNTIME_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
                     "https_proxy", "no_proxy", prefixes=("DOCKER_",))


def harbor_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment, with plain tracebacks (so the last line is the error) and no wrapping,
    LiteLLM's bundled cost map, and `extra` (the --ae values Harbor's `${NAME}` templates read)."""
    return {**THIRD_PARTY_ENV, **os.environ, "_TYPER_STANDARD_TRACEBACK": "1", "COLUMNS": "4000", "TERM": "dumb",
            **(extra or {})}


def run_job(files: JobFiles, config: dict[str, Any], running: Running) -> JobOutcome:
    """Run the job with Harbor, or resume it when Harbor has started it before: `harbor job resume`
    keeps every finished trial and reruns the unfinished and the cancelled ones, with the config
    the job started with (so a rerun with another --jobs resumes it too)."""
    if files.stored_config() is None:
        atomic_write_json(files.config, config)
        argv = [sys.executable, "-m", "harbor.cli.main", "run", "-c", str(files.config), "-y"]
    else:
        argv = [sys.executable, "-m", "harbor.cli.main", "job", "resume", "-p", str(files.dir)]
    pid_box: list[int] = []

    def spawned(pid: int) -> None:
        pid_box.append(pid)
        running.add(pid)

    try:
        result = run_process(argv, cwd=files.out, env=harbor_env(running.env), stdin=None,
                             stdout_path=files.stdout, stderr_path=files.stderr, wall_timeout=float("inf"),
                             idle_timeout=float("inf"), on_spawn=spawned)
    finally:
        for pid in pid_box:
            running.discard(pid)
        if running.stopping.is_set() and (config.get("environment") or {}).get("type") == "docker":
            remove_leftovers(files.dir)
    if result.spawn_error:
        return JobOutcome(None, f"harbor could not start: {result.spawn_error}")
    if result.exit_code == 0:
        return JobOutcome(0, None)
    return JobOutcome(result.exit_code, last_error(files) or f"harbor run exited with {result.exit_code}")
