"""One attempt's process inside an environment, supervised from hoh's side through `exec` alone.

Harbor's `exec` runs a command to its end and returns its output, which cannot give an idle timeout, an
output cap or a partial event stream. So a POSIX-shell supervisor (`SUPERVISOR`, put into every
environment at its start) starts the CLI in its own session with stdin, stdout and stderr as files of the
attempt's own directory there, and records its pid and exit code; hoh looks at the files' sizes (activity,
the output cap), the exit code, and its own clock (the wall timeout), kills the whole session when a limit is
reached or hoh is interrupted, and then copies both streams out. Needs `sh`, `wc`, `kill`, `head`, `date` and
`sleep` in the image: every image that can run a CLI has them.
"""

from __future__ import annotations

import asyncio
import math
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..harness.process import KILL_GRACE_SECONDS, ProcessResult, file_excerpt

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

ROOT = "/opt/hoh"
"""hoh's directory in every environment: the supervisor, the attempts' streams, hoh's own programs."""
SUPERVISOR_PATH = f"{ROOT}/supervise.sh"
SUPERVISOR = """#!/bin/sh
# hoh's supervisor of one attempt (hoh/envs/supervise.py): DIR CWD -- ARGV...
d=$1; cwd=$2; shift 3
cd "$cwd" 2>"$d/stderr" || { echo 126 >"$d/exit"; exit 0; }
# Its own session, so one kill reaches everything it starts (setsid does not fork: the job is no group leader).
if command -v setsid >/dev/null 2>&1; then set -- setsid "$@"; fi
"$@" <"$d/stdin" >"$d/stdout" 2>"$d/stderr" &
echo $! >"$d/pid"
wait $!
echo $? >"$d/exit.part" && mv "$d/exit.part" "$d/exit"
"""
LOOK_SECONDS = 10.0
"""How long one look waits inside the environment for the attempt to end: every `exec` costs ~0.1 s of CPU
(Docker Compose's), so hoh looks a few times a minute, not several times a second, and still sees an end at
once. The idle timeout and the output cap are checked at this grain."""
EXEC_TIMEOUT = 60
NOT_FOUND = 127


@dataclass(frozen=True)
class Streams:
    """Where one attempt's files are in its environment."""

    dir: str

    @property
    def stdin(self) -> str:
        return f"{self.dir}/stdin"

    @property
    def stdout(self) -> str:
        return f"{self.dir}/stdout"

    @property
    def stderr(self) -> str:
        return f"{self.dir}/stderr"

    @property
    def pid(self) -> str:
        return f"{self.dir}/pid"

    @property
    def exit(self) -> str:
        return f"{self.dir}/exit"


def stage_stdin(streams: Streams, stdin: bytes | None, staging: Path) -> None:
    """The attempt's stdin, put in with the role's view (one copy into the environment for both)."""
    path = staging / streams.stdin.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(stdin or b"")


async def start(env: "BaseEnvironment", streams: Streams, argv: list[str], cwd: str, variables: dict[str, str]) -> None:
    command = " ".join(shlex.quote(a) for a in ["sh", SUPERVISOR_PATH, streams.dir, cwd, "--", *argv])
    result = await env.exec(f"nohup {command} >/dev/null 2>&1 &", env=variables, timeout_sec=EXEC_TIMEOUT)
    if result.return_code != 0:
        raise OSError(f"the environment would not start the attempt: {(result.stderr or result.stdout or '').strip()}")


async def look(env: "BaseEnvironment", streams: Streams, wait: float = 0.0,
               max_output: int | None = None) -> tuple[int | None, int]:
    """(the exit code, None while it runs; stdout and stderr's bytes so far), after waiting up to `wait`
    seconds inside the environment for the attempt to end (or to print more than `max_output`): one `exec`
    per look, however long the CLI runs."""
    q = shlex.quote
    size = f"$(( $(wc -c < {q(streams.stdout)} 2>/dev/null || echo 0) + $(wc -c < {q(streams.stderr)} 2>/dev/null || echo 0) ))"
    until = (f'end=$(( $(date +%s) + {math.ceil(wait)} )); while [ ! -e {q(streams.exit)} ] && '
             f'[ "$(date +%s)" -lt "$end" ] && [ {size} -le {max_output or 0} ]; do sleep 0.2; done; ') if wait else ""
    result = await env.exec(f"{until}cat {q(streams.exit)} 2>/dev/null; echo '|'; echo {size}",
                            timeout_sec=EXEC_TIMEOUT + math.ceil(wait))
    code, _, total = (result.stdout or "").partition("|")
    try:
        return (int(code.strip()) if code.strip() else None), int(total.strip() or 0)
    except ValueError:
        return None, 0


def _signal(streams: Streams, sig: str) -> str:
    """A shell command sending `sig` to the attempt's whole session (its leader alone without setsid)."""
    pid = f"$(cat {shlex.quote(streams.pid)} 2>/dev/null)"
    return f'p={pid}; [ -n "$p" ] && {{ kill -{sig} -- "-$p" 2>/dev/null || kill -{sig} "$p" 2>/dev/null; }}; true'


async def kill(env: "BaseEnvironment", streams: Streams, grace: float = KILL_GRACE_SECONDS) -> None:
    """TERM, a grace period for the CLI to end, then KILL, to the attempt's whole session."""
    await env.exec(_signal(streams, "TERM"), timeout_sec=EXEC_TIMEOUT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if (await look(env, streams))[0] is not None:
            break
        await asyncio.sleep(0.2)
    await env.exec(_signal(streams, "KILL"), timeout_sec=EXEC_TIMEOUT)


async def supervise(env: "BaseEnvironment", streams: Streams, *, wall: float, idle: float,
                    max_output: int) -> tuple[int | None, Literal["wall", "idle", "output"] | None, float]:
    """Wait for the attempt's end or a limit: (exit code, None when killed; the limit that stopped it; seconds).
    What the CLI left running in its session is killed with it (`collect`)."""
    begun = last_activity = time.monotonic()
    seen = 0
    try:
        while True:
            window = max(1.0, min(LOOK_SECONDS, wall - (time.monotonic() - begun),
                                  idle - (time.monotonic() - last_activity)))
            code, size = await look(env, streams, window, max_output)
            now = time.monotonic()
            if code is not None:
                # A flood that ended before hoh looked is still cut at the cap when it is copied out.
                return (None, "output", round(now - begun, 3)) if size > max_output else (code, None, round(now - begun, 3))
            if size != seen:
                seen, last_activity = size, now
            limit: Literal["wall", "idle", "output"] | None = (
                "wall" if now - begun > wall else "idle" if now - last_activity > idle
                else "output" if size > max_output else None)
            if limit is not None:
                await kill(env, streams)
                return None, limit, round(time.monotonic() - begun, 3)
    except asyncio.CancelledError:
        await env.exec(_signal(streams, "KILL"), timeout_sec=EXEC_TIMEOUT)  # hoh was interrupted: not alone on
        raise


async def collect(env: "BaseEnvironment", streams: Streams, attempt_dir: Path, max_output: int) -> tuple[Path, Path]:
    """Kill what the attempt left running, then copy both streams out, each cut at the output cap first (a flood
    stays in the environment)."""
    q = shlex.quote
    kept = f"{streams.dir}/kept"
    await env.exec(f"{_signal(streams, 'KILL')}; mkdir -p {q(kept)}; "
                   f"head -c {max_output} {q(streams.stdout)} > {q(kept)}/events.jsonl 2>/dev/null; "
                   f"head -c {max_output} {q(streams.stderr)} > {q(kept)}/stderr.log 2>/dev/null; true",
                   timeout_sec=EXEC_TIMEOUT)
    with tempfile.TemporaryDirectory(dir=attempt_dir, prefix=".streams-") as tmp:
        await env.download_dir(kept, tmp)
        for name in ("events.jsonl", "stderr.log"):
            source, dest = Path(tmp, name), attempt_dir / name
            if source.is_file() and not source.is_symlink():
                source.replace(dest)
            else:
                dest.write_bytes(b"")
    return attempt_dir / "events.jsonl", attempt_dir / "stderr.log"


def result(code: int | None, limit: Literal["wall", "idle", "output"] | None, seconds: float, out: Path,
           err: Path, program: str) -> ProcessResult:
    excerpt = file_excerpt(err)
    spawn_error = None
    if code == NOT_FOUND and out.stat().st_size == 0 and "not found" in excerpt:
        spawn_error = f"{program}: not found in the environment"
    return ProcessResult(code, limit, seconds, out, err, excerpt, spawn_error=spawn_error)
