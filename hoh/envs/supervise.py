"""One attempt's process inside an environment, supervised from hoh's side through `exec` alone.

Harbor's `exec` runs a command to its end and returns its output, which cannot give an idle timeout, an
output cap or a partial event stream. So a POSIX-shell supervisor (`SUPERVISOR`, put into every
environment at its start) starts the CLI in its own session with stdin, stdout and stderr as files of the
attempt's own directory there, and records its pid and exit code; hoh polls the files' sizes (activity, the
output cap), the exit code, and its own clock (the wall timeout), kills the whole session when a limit is
reached or hoh is interrupted, and then copies both streams out. Needs `sh`, `wc`, `kill` and `head` in the
image: every image that can run a CLI has them.
"""

from __future__ import annotations

import asyncio
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
POLL_FIRST, POLL_MAX = 0.1, 1.0
"""Seconds between two looks at the attempt: short at first (most attempts of a fast harness end in a second),
then at most POLL_MAX (every look is one `exec`)."""
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


async def start(env: "BaseEnvironment", streams: Streams, argv: list[str], cwd: str, variables: dict[str, str],
                stdin: bytes | None) -> None:
    await env.exec(f"rm -rf {shlex.quote(streams.dir)} && mkdir -p {shlex.quote(streams.dir)}", timeout_sec=EXEC_TIMEOUT)
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(stdin or b"")
        fh.flush()
        await env.upload_file(fh.name, streams.stdin)
    command = " ".join(shlex.quote(a) for a in ["sh", SUPERVISOR_PATH, streams.dir, cwd, "--", *argv])
    result = await env.exec(f"nohup {command} >/dev/null 2>&1 &", env=variables, timeout_sec=EXEC_TIMEOUT)
    if result.return_code != 0:
        raise OSError(f"the environment would not start the attempt: {(result.stderr or result.stdout or '').strip()}")


async def look(env: "BaseEnvironment", streams: Streams) -> tuple[int | None, int]:
    """(the exit code, None while it runs; stdout and stderr's bytes so far)."""
    q = shlex.quote
    result = await env.exec(f"cat {q(streams.exit)} 2>/dev/null; echo '|'; cat {q(streams.stdout)} {q(streams.stderr)} "
                            "2>/dev/null | wc -c", timeout_sec=EXEC_TIMEOUT)
    code, _, size = (result.stdout or "").partition("|")
    try:
        return (int(code.strip()) if code.strip() else None), int(size.strip() or 0)
    except ValueError:
        return None, 0


async def kill(env: "BaseEnvironment", streams: Streams, grace: float = KILL_GRACE_SECONDS) -> None:
    """TERM, then KILL, to the attempt's whole session."""
    pid = f"$(cat {shlex.quote(streams.pid)} 2>/dev/null)"
    for sig, wait in (("TERM", grace), ("KILL", 0.0)):
        await env.exec(f'p={pid}; [ -n "$p" ] && {{ kill -{sig} -- "-$p" 2>/dev/null || kill -{sig} "$p" 2>/dev/null; }}; true',
                       timeout_sec=EXEC_TIMEOUT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if (await look(env, streams))[0] is not None:
                return
            await asyncio.sleep(0.2)


async def supervise(env: "BaseEnvironment", streams: Streams, *, wall: float, idle: float,
                    max_output: int) -> tuple[int | None, Literal["wall", "idle", "output"] | None, float]:
    """Wait for the attempt's end or a limit: (exit code, None when killed; the limit that stopped it; seconds)."""
    begun = last_activity = time.monotonic()
    seen, pause = 0, POLL_FIRST
    try:
        while True:
            code, size = await look(env, streams)
            now = time.monotonic()
            if code is not None:
                await kill(env, streams, grace=0.0)  # what it left running in its session
                return code, None, round(now - begun, 3)
            if size != seen:
                seen, last_activity = size, now
            limit: Literal["wall", "idle", "output"] | None = (
                "wall" if now - begun > wall else "idle" if now - last_activity > idle
                else "output" if size > max_output else None)
            if limit is not None:
                await kill(env, streams)
                return None, limit, round(time.monotonic() - begun, 3)
            await asyncio.sleep(pause)
            pause = min(POLL_MAX, pause * 2)
    except asyncio.CancelledError:
        await kill(env, streams, grace=0.0)  # hoh was interrupted: the CLI must not go on alone
        raise


async def collect(env: "BaseEnvironment", streams: Streams, attempt_dir: Path, max_output: int) -> tuple[Path, Path]:
    """Copy both streams out (each cut at the output cap first: a flood stays in the environment)."""
    out, err = attempt_dir / "events.jsonl", attempt_dir / "stderr.log"
    for remote, local in ((streams.stdout, out), (streams.stderr, err)):
        q = shlex.quote
        await env.exec(f"head -c {max_output} {q(remote)} > {q(remote)}.kept 2>/dev/null || : > {q(remote)}.kept",
                       timeout_sec=EXEC_TIMEOUT)
        try:
            await env.download_file(f"{remote}.kept", local)
        except Exception:  # noqa: BLE001 - a stream the attempt never wrote is an empty one
            local.write_bytes(b"")
    return out, err


def result(code: int | None, limit: Literal["wall", "idle", "output"] | None, seconds: float, out: Path,
           err: Path, program: str) -> ProcessResult:
    excerpt = file_excerpt(err)
    spawn_error = None
    if code == NOT_FOUND and out.stat().st_size == 0 and "not found" in excerpt:
        spawn_error = f"{program}: not found in the environment"
    return ProcessResult(code, limit, seconds, out, err, excerpt, spawn_error=spawn_error)
