"""The one subprocess choke point: every process hoh starts goes through `run_process` (harness
CLIs: long, logged to files) or `call` (git, `--version`, probes: short, captured).

Both own the timeouts, the kill of the whole process group (children included), and bounded
memory: `run_process` tees stdout and stderr to files as they arrive (so a kill keeps the partial
event stream) and keeps only the head and tail of stderr; `call` keeps stdout up to a cap and the
head and tail of stderr. Neither inherits hoh's environment: each caller says the whole environment of
what it starts, built from nothing (`inherited` takes what a program needs of the user's settings), so
the model's key and whatever else hoh's process holds reach no program that does not need it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Mapping

TAIL_BYTES = 16 * 1024
KILL_GRACE_SECONDS = 3.0
MAX_OUTPUT_BYTES = 512 * 1024 * 1024
"""A harness that prints more than this (stdout and stderr together) is stopped: a flood, not work."""


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None
    """None when hoh killed the process."""
    timed_out: Literal["wall", "idle", "output"] | None
    """Why hoh stopped it: the wall or idle timeout, or an output flood past MAX_OUTPUT_BYTES."""
    duration_s: float
    stdout_path: Path
    stderr_path: Path
    stderr_excerpt: str
    """Head and tail of stderr, for error messages and typing."""
    spawn_error: str | None = None
    """Set when the executable could not be started at all."""


class _Tee(threading.Thread):
    """Copy a pipe to a file chunk by chunk, noting the time of the last output and, if asked, the
    head and tail for an excerpt (`keep` alone serves `call`, which reads its pipes itself)."""

    def __init__(self, pipe, path: Path | None, keep_excerpt: bool):
        super().__init__(daemon=True)
        self.pipe, self.path, self.keep_excerpt = pipe, path, keep_excerpt
        self.last_activity = time.monotonic()
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        with open(self.path, "wb") as out:
            for chunk in iter(lambda: self.pipe.read1(65536), b""):
                self.last_activity = time.monotonic()
                out.write(chunk)
                out.flush()
                self.keep(chunk)

    def keep(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.keep_excerpt:
            if len(self.head) < TAIL_BYTES:
                self.head += chunk[: TAIL_BYTES - len(self.head)]
            self.tail = (self.tail + chunk)[-TAIL_BYTES:]

    def excerpt(self) -> str:
        head, tail = bytes(self.head), bytes(self.tail)
        overlap = len(head) + len(tail) - self.total
        if self.total <= len(head):
            text = head
        elif overlap >= 0:
            text = head + tail[overlap:]
        else:
            return (head.decode("utf-8", "replace") + f"\n… [{-overlap} bytes omitted] …\n"
                    + tail.decode("utf-8", "replace"))
        return text.decode("utf-8", "replace")


def inherited(*names: str, prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """Of hoh's own environment, only the variables `names` (and those starting with one of `prefixes`): the
    user's settings a program needs (its PATH, npm's or Docker's configuration), and nothing else."""
    return {k: v for k, v in os.environ.items() if k in names or (prefixes and k.startswith(prefixes))}


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # The leader is gone; make sure no child it left in the group survives.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes | None,
    stdout_path: Path,
    stderr_path: Path,
    wall_timeout: float,
    idle_timeout: float,
    on_spawn: Callable[[int], None] | None = None,
    max_output: int = MAX_OUTPUT_BYTES,
    preexec: Callable[[], None] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """Run argv in its own process group with exactly the environment `env`; never a shell string, never an
    open stdin.

    `on_spawn(pid)` is called once the process exists, so a caller can record it and reap the
    group after its own crash (see `reap`). `preexec` runs in the child before it execs (an attempt's
    cgroups and rlimits, `envs/local/limits.py`); `pass_fds` stay open in it (the jail's environment,
    `envs/local/jail.py`).
    """
    start = time.monotonic()
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, start_new_session=True, preexec_fn=preexec, pass_fds=pass_fds,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
    except OSError as err:
        stdout_path.write_bytes(b"")
        stderr_path.write_text(str(err))
        return ProcessResult(None, None, 0.0, stdout_path, stderr_path, str(err), spawn_error=str(err))

    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        return _supervise(proc, start, stdin, stdout_path, stderr_path, wall_timeout, idle_timeout, on_spawn,
                          max_output)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def kill_running() -> None:
    """Kill the process group of every attempt this process runs now: Developers working at once run in threads
    of their own, which a Ctrl-C in the main thread never reaches."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill_group(proc)


def _supervise(proc: subprocess.Popen, start: float, stdin: bytes | None, stdout_path: Path, stderr_path: Path,
               wall_timeout: float, idle_timeout: float, on_spawn: Callable[[int], None] | None,
               max_output: int) -> ProcessResult:
    if on_spawn:
        on_spawn(proc.pid)
    out, err = _Tee(proc.stdout, stdout_path, False), _Tee(proc.stderr, stderr_path, True)
    out.start()
    err.start()
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()

    timed_out: Literal["wall", "idle", "output"] | None = None
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now - start > wall_timeout:
                timed_out = "wall"
            elif now - max(out.last_activity, err.last_activity, start) > idle_timeout:
                timed_out = "idle"
            elif out.total + err.total > max_output:
                timed_out = "output"
            if timed_out:
                _kill_group(proc)
                break
            try:
                proc.wait(timeout=0.05)  # wakes at the exit: a short command does not wait out a whole tick
            except subprocess.TimeoutExpired:
                pass
    except BaseException:
        # Ctrl-C or any error in hoh: the CLI runs in its own session and would not notice.
        _kill_group(proc)
        raise
    if not timed_out:
        _kill_leftovers(proc)
    proc.wait()
    out.join(timeout=10)
    err.join(timeout=10)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - start, 3),
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stderr_excerpt=err.excerpt(),
    )


def file_excerpt(path: Path) -> str:
    """The head and tail of a file, as `ProcessResult.stderr_excerpt` keeps them."""
    tee = _Tee(None, None, True)
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(65536), b""):
                tee.keep(chunk)
    except OSError:
        return ""
    return tee.excerpt()


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


@dataclass(frozen=True)
class CallResult:
    exit_code: int | None
    """None when the call timed out and was killed."""
    stdout: bytes
    stderr: str
    """Head and tail of stderr."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class OutputTooLarge(OSError):
    """A short call printed more than its cap: refused rather than silently cut."""


def call(argv: list[str], *, env: Mapping[str, str], cwd: Path | None = None, timeout: float = 60.0,
         max_stdout: int = 64 * 1024 * 1024, stdin: bytes | None = None) -> CallResult:
    """Run a short command to completion in its own process group with exactly the environment `env`, stdin
    closed (or `stdin`'s bytes).

    On timeout the whole group is killed and `exit_code` is None. Raises OSError when the program
    cannot be started, OutputTooLarge when stdout passes `max_stdout`. One selector loop reads both
    pipes: no threads, since hoh makes many such calls per loop (git); `stdin` comes from an unlinked
    temporary file, so no pipe of it can fill up."""
    feed = None
    if stdin is not None:
        feed = tempfile.TemporaryFile()
        feed.write(stdin)
        feed.seek(0)
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True,
                                stdin=feed if feed is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        if feed is not None:
            feed.close()
    out, total, err = bytearray(), 0, _Tee(None, None, True)
    deadline, timed_out = time.monotonic() + timeout, False
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "out")
    selector.register(proc.stderr, selectors.EVENT_READ, "err")
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                _kill_group(proc)
                break
            events = selector.select(timeout=min(remaining, 0.5))
            for key, _ in events:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.data == "out":
                    total += len(chunk)
                    out += chunk[: max(0, max_stdout + 1 - len(out))]
                else:
                    err.keep(chunk)
            if not events and proc.poll() is not None:
                _kill_leftovers(proc)  # a child of the leader still holds the pipes
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
    if not timed_out:
        _kill_leftovers(proc)
    proc.wait()
    if total > max_stdout:
        raise OutputTooLarge(f"{argv[0]} printed more than {max_stdout} bytes")
    return CallResult(None if timed_out else proc.returncode, bytes(out), err.excerpt())


def _kill_leftovers(proc: subprocess.Popen) -> None:
    """Children that outlive the leader would keep the pipes open and leak."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, a unique identity."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def reap(pid: int, ticks: int | None) -> bool:
    """Kill the process group led by `pid` if that very process still runs (not a reused pid)."""
    if ticks is None or start_ticks(pid) != ticks:
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
