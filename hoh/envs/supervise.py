"""One attempt's process inside an environment, supervised from hoh's side through `exec` alone.

Harbor's `exec` runs a command to its end and returns its output, which cannot give an idle timeout, an
output cap or a partial event stream. So a POSIX-shell supervisor (`SUPERVISOR`, put into every
environment at its start) starts the CLI in its own session with stdin, stdout and stderr as files of the
attempt's own directory there, and records its pid and exit code; hoh looks at the files' sizes (activity,
the output cap), the exit code, and its own clock (the wall timeout), kills the whole session when a limit is
reached or hoh is interrupted, and then copies both streams out.

Every `exec` costs Docker Compose ~0.1 s of CPU, so through Harbor's API an attempt takes four however many
files it moves: one copy in (the role's view and stdin, staged together), one `exec` that puts them in place,
starts the CLI and waits for it (`LOOK_SECONDS`, again as long as it runs), one that kills what is left and
gathers the streams and the writable paths into one directory, and one copy out. Through a channel
(`channel.py`: Harbor's own Docker and Podman) the copies ride on the `exec`s, and an attempt whose CLI ends
within the first look is collected by the `exec` that started it (`inside.py attempt`). Needs `sh`, `wc`, `kill`,
`head`, `date` and `sleep` in the image: every image that can run a CLI has them.

The attempt's variables (the role's, a check's) are the CLI's alone: they travel in the copy, as a file of
quoted `export` lines (`stage_env`) that the supervisor reads in the subshell that becomes the CLI, over the
environment's own. No `exec` of hoh's carries them, so none is in the environment or on the command line of the
engine's client on this machine (Docker's, which runs with hoh's environment, and whose command line every user
of the machine can read), nor in the shell that places the files and starts the supervisor there.
"""

from __future__ import annotations

import asyncio
import json
import math
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..evidence.checks import ENV_NAME
from ..harness.process import KILL_GRACE_SECONDS, ProcessResult, file_excerpt
from .channel import Channel, Step, add, inside, printed, unpack

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

ROOT = "/opt/hoh"
"""hoh's directory in every environment: the supervisor, the attempts' streams, hoh's own programs."""
SUPERVISOR_PATH = f"{ROOT}/supervise.sh"
SUPERVISOR = """#!/bin/sh
# hoh's supervisor of one attempt (hoh/envs/supervise.py): DIR CWD -- ARGV...
d=$1; cwd=$2; shift 3
echo $$ >"$d/sup"
cd "$cwd" 2>"$d/stderr" || { echo 126 >"$d/exit"; exit 0; }
# Its own session, so one kill reaches everything it starts (setsid does not fork: the job is no group leader).
if command -v setsid >/dev/null 2>&1; then set -- setsid "$@"; fi
# The attempt's variables (hoh's file, every value quoted), for the CLI alone: the subshell becomes it.
( . "$d/env" && exec "$@" ) <"$d/stdin" >"$d/stdout" 2>"$d/stderr" &
echo $! >"$d/pid"
wait $!
echo $? >"$d/exit.part" && mv "$d/exit.part" "$d/exit"
"""
LOOK_SECONDS = 10.0
"""How long one look waits inside the environment for the attempt to end: every `exec` costs ~0.1 s of CPU
(Docker Compose's), so hoh looks a few times a minute, not several times a second, and still sees an end at
once. The idle timeout and the output cap are checked at this grain."""
EXEC_TIMEOUT = 60
SLOWEST_BYTES_PER_SECOND = 1 << 20
"""What a channel's `exec` is given beyond EXEC_TIMEOUT for what it sends: a first view of 300,000 files is a tar of
~450 MB, taken apart and placed there file by file."""
NOT_FOUND = 127


@dataclass(frozen=True)
class Attempt:
    """Where one attempt's files are in its environment."""

    number: int

    @property
    def dir(self) -> str:
        return f"{ROOT}/attempts/{self.number}"

    @property
    def incoming(self) -> str:
        """What hoh copies in for it, before it is moved into place."""
        return f"{ROOT}/in/{self.number}"

    @property
    def outgoing(self) -> str:
        """What hoh copies out after it: `streams/` and `writable/<n>/`."""
        return f"{ROOT}/out/{self.number}"

    def file(self, name: str) -> str:
        return f"{self.dir}/{name}"


def stage_stdin(attempt: Attempt, stdin: bytes | None, staging: Path) -> None:
    """The attempt's stdin, staged with the role's view (one copy into the environment for both)."""
    path = staging / attempt.file("stdin").lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(stdin or b"")


def stage_env(attempt: Attempt, variables: dict[str, str], staging: Path) -> None:
    """The attempt's variables as the supervisor reads them (`. FILE` in the CLI's subshell): one quoted `export`
    line each. A name a shell would not read as one is refused, never written."""
    for name, value in variables.items():
        if not ENV_NAME.match(name) or "\0" in value:
            raise ValueError(f"not an environment variable: {name!r}")
    path = staging / attempt.file("env").lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items()),
                    encoding="utf-8", errors="surrogateescape")


def _wait(attempt: Attempt, seconds: float, max_output: int) -> str:
    """Wait in the environment up to `seconds` for the attempt to end or flood, then print `CODE|SIZE`."""
    q = shlex.quote
    size = " + ".join(f"$(wc -c < {q(attempt.file(n))} 2>/dev/null || echo 0)" for n in ("stdout", "stderr"))
    # Every look spawns a few processes: often at first (a short attempt is seen to end at once), then rarely.
    return (f'pause=0.01; n=0; end=$(( $(date +%s) + {math.ceil(seconds)} )); '
            f'while [ ! -e {q(attempt.file("exit"))} ] && '
            f'[ "$(date +%s)" -lt "$end" ] && [ $(( {size} )) -le {max_output} ]; do sleep $pause; n=$((n + 1)); '
            f'[ "$n" -lt 30 ] || pause=0.1; done; '
            f"cat {q(attempt.file('exit'))} 2>/dev/null; echo '|'; echo $(( {size} ))")


def _parsed(stdout: str | None) -> tuple[int | None, int]:
    """`_wait`'s `CODE|SIZE` (what follows it, a collection's lines, left alone)."""
    code, _, rest = (stdout or "").partition("|")
    total = rest.strip().partition("\n")[0]
    try:
        return (int(code.strip()) if code.strip() else None), int(total.strip() or 0)
    except ValueError:
        return None, 0


def signal_session(attempt: Attempt, sig: str) -> str:
    """A shell command sending `sig` to the attempt's whole session (its leader alone without setsid)."""
    pid = f"$(cat {shlex.quote(attempt.file('pid'))} 2>/dev/null)"
    return f'p={pid}; [ -n "$p" ] && {{ kill -{sig} -- "-$p" 2>/dev/null || kill -{sig} "$p" 2>/dev/null; }}; true'


Limit = Literal["wall", "idle", "output"]
Keep = tuple[int | str, ...]
"""The environment's own processes, which no sweep kills: pids, and hoh's server as `pid/start time`."""
LIVE = ('stray=0; for d in /proc/[0-9]*; do p=${d#/proc/}; read -r s < "$d/stat" 2>/dev/null || continue; '
        's=${s##*) }; set -- $s; case " $keep $$ $PPID " in *" $p "*|*" $p/${20} "*) continue ;; esac; '
        '[ "$1" = Z ] && continue; '
        'live="$live $p"; [ "$4" = "$cli" ] || [ "$p" = "$sup" ] || stray=$((stray + 1)); done')
"""The processes in the environment but `$keep` (by pid, or by pid/start time: hoh's server, `session.py`), this
shell and its parent (hoh's `inside.py attempt`, which runs it; outside it, an `exec`'s shell, whose parent is
none there, or hoh's server), zombies not counted (an init that is `sleep`
reaps none), as `$live`; as `$stray`, how many of them are neither in the session of the CLI `$cli` (its
processes, just killed) nor the supervisor `$sup`."""


def sweep(keep: Keep, empty_tmp: bool = True, ended: Attempt | None = None) -> str:
    """A shell command that kills every process an earlier attempt left running (all but `keep`, the
    environment's own: its init and what init started), empties /tmp (unless a view kept there is pruned by
    `inside.py` instead), and prints `left=N` first. `ended`: the attempt just ended, whose CLI's session and
    supervisor are killed but not counted as left (their pids are files a role could write: a role may hide a
    process from the count this way, never from the kill)."""
    empty = "rm -rf /tmp/* /tmp/.[!.]* /tmp/..?* 2>/dev/null; " if empty_tmp else ""
    q = shlex.quote
    mine = (f'cli=$(cat {q(ended.file("pid"))} 2>/dev/null); sup=$(cat {q(ended.file("sup"))} 2>/dev/null); '
            if ended else 'cli=""; sup=""; ')
    return (f'keep="{" ".join(map(str, keep))}"; {mine}left=0; for pass in 1 2 3; do live=""; {LIVE}; '
            '[ -n "$live" ] || break; left=$((left + stray)); kill -9 $live 2>/dev/null; done; '
            f'{empty}echo "left=$left"')


class Unplaced(Exception):
    """The environment's view differed from hoh's record (`inside.py`): nothing was started."""

    def __init__(self, report: dict) -> None:
        super().__init__("the environment's view differed from hoh's record")
        self.report = report


class Unlisted(OSError):
    """`inside.py collect` said nothing (the attempt broke the image's python3, say): copy everything out."""


def reported(stdout: str, prefix: str) -> tuple[dict | None, str]:
    """The JSON line `prefix=…` `inside.py` printed, and the output without it."""
    found, rest = None, []
    for line in stdout.splitlines(keepends=True):
        if line.startswith(prefix + "=") and found is None:
            try:
                found = json.loads(line[len(prefix) + 1:])
            except ValueError:
                found = None
            continue
        rest.append(line)
    return found, "".join(rest)


def own_processes() -> str:
    """A shell command printing the environment's own processes (run once, before any attempt)."""
    return f'keep=""; cli=""; sup=""; live=""; {LIVE}; echo $live'


@dataclass(frozen=True)
class Ran:
    code: int | None
    """The exit code; None when a limit killed it."""
    limit: Limit | None
    seconds: float
    leftovers: int = 0
    """Processes an earlier attempt had left running in the environment, killed before this one started."""
    placed: dict | None = None
    """What `inside.py place` said, when it brought a kept view up to date."""
    came: "Came | None" = None
    """What the attempt's own `exec` collected after its end (`inside.py attempt`), when it could."""
    gathered: str = ""
    """What its collecting steps printed (their `left=`, `collected=`)."""


@dataclass(frozen=True)
class Came:
    """What one `exec` through a channel brought out: its stdout file and where the tar in it starts."""

    stdout: Path
    at: int


@dataclass(frozen=True)
class Through:
    """An attempt's `exec`s through a channel (`channel.py`): the tar of what goes in, and where the stdout of
    each goes. What comes out is collected by an `exec` of its own, after the CLI's end: `inside.py collect` is
    told the record `place` wrote as hoh read it before the CLI started, never anything the CLI could change."""

    channel: Channel
    sent: Path
    scratch: Path


async def _exec(env: "BaseEnvironment", through: Through | None, command: str | Step, timeout: float,
                sent: Path | None = None, mark: str | None = None) -> tuple[int, str, str, Came | None]:
    """`command` there, by Harbor's `exec` or through the channel: (exit code, stdout text, stderr, what came)."""
    if through is None:
        shell = command.shell if isinstance(command, Step) else command
        result = await env.exec(shell, timeout_sec=math.ceil(timeout))
        return result.return_code, result.stdout or "", result.stderr or "", None
    out = through.scratch / f"exec-{time.monotonic_ns()}"
    reply = await through.channel.run(command, sent, out, mark or through.channel.mark(), timeout)
    came = Came(out, reply.tar) if reply.tar is not None else None
    return reply.code, reply.text, reply.stderr, came


def moves(attempt: Attempt, roots: list[str]) -> dict:
    """What puts what was copied in for `attempt` at `roots`: each root (and hoh's out dir) removed, each staged
    copy moved to its root, the incoming dir removed. `inside.py` does it itself (`moved`); `moving` in a shell."""
    return {"remove": [*roots, f"{ROOT}/out"], "put": [[f"{attempt.incoming}{root}", root] for root in roots],
            "then": f"{ROOT}/in"}


def moving(attempt: Attempt, roots: list[str]) -> str:
    """`moves` as one shell step, for an environment reached by Harbor's `exec` alone."""
    q, steps = shlex.quote, moves(attempt, roots)
    shell = [f"rm -rf {' '.join(q(r) for r in steps['remove'])}"]
    for staged, root in steps["put"]:
        shell.append(f"if [ -e {q(staged)} ] || [ -L {q(staged)} ]; then mkdir -p {q(str(Path(root).parent))} && "
                     f"mv {q(staged)} {q(root)}; fi")
    shell.append(f"rm -rf {q(steps['then'])}")
    return "; ".join(shell)


async def run(env: "BaseEnvironment", attempt: Attempt, roots: list[str], argv: list[str], cwd: str, *,
              wall: float, idle: float, max_output: int, keep: Keep | None = None,
              view: list[str] | None = None, through: Through | None = None, gather: dict | None = None) -> Ran:
    """Put the copied-in view in place (what an earlier attempt left of it removed), start the CLI, and wait for
    its end or a limit. `keep` (no other attempt runs there): kill whatever an earlier one left running but
    those processes, and empty /tmp, first. `view`: the arguments of `inside.py place`, which brings a view kept
    there up to date instead; Unplaced, nothing started, when it found it changed. `through`: a channel's, what
    goes in sent on the first `exec`'s stdin, where `inside.py attempt` does all of it and, when the CLI ends
    within the first look, collects as `gather` says (`Move.gather`): `Ran.came`."""
    q = shlex.quote
    swept = [sweep(keep, empty_tmp=view is None)] if keep is not None else []
    window = max(1.0, min(LOOK_SECONDS, wall, idle))
    mark = None
    if through is not None:
        mark = through.channel.mark()
        job = {"place": view, "moves": moves(attempt, [*roots, attempt.dir]),
               "start": ["sh", SUPERVISOR_PATH, attempt.dir, cwd, "--", *argv],
               "exit": attempt.file("exit"), "streams": [attempt.file("stdout"), attempt.file("stderr")],
               "window": window, "max_output": max_output, "collect": {**gather, "mark": mark} if gather else None}
        await asyncio.to_thread(add, through.sent, "job.json", json.dumps(job).encode())
        started: str | Step = Step(("attempt", attempt.incoming), "; ".join(swept))
    else:
        steps = list(swept)
        if view is not None:
            steps.append(f"{{ {inside('place', *view)} || {{ rm -rf {q(f'{ROOT}/in')}; exit 0; }}; }}")
        steps.append(moving(attempt, [*roots, attempt.dir]))
        command = " ".join(q(a) for a in ["sh", SUPERVISOR_PATH, attempt.dir, cwd, "--", *argv])
        # HUP ignored before the fork, not only by nohup once it runs: an exec with a terminal (podman-compose's
        # always has one) hangs up as its shell exits, which killed a supervisor that nohup had not reached yet.
        started = (f"{'; '.join(steps)}; trap '' HUP; nohup {command} >/dev/null 2>&1 & "
                   f"{_wait(attempt, window, max_output)}")
    begun = last_activity = time.monotonic()
    sending = through.sent.stat().st_size / SLOWEST_BYTES_PER_SECOND if through is not None else 0.0
    status, stdout, stderr, came = await _exec(env, through, started, EXEC_TIMEOUT + window + sending,
                                               through and through.sent, mark)
    if status != 0:
        raise OSError(f"the environment would not start the attempt: {(stderr or stdout).strip()[-300:]}")
    leftovers = 0
    if keep is not None:
        first, _, stdout = stdout.partition("\n")
        leftovers = int(first.removeprefix("left=")) if first.startswith("left=") and first[5:].isdigit() else 0
    # Said before anything of the role ran: only then is what the attempt's own `exec` collected believed.
    guarded = through is not None and stdout.startswith("guarded=1\n")
    if through is not None:
        stdout = stdout.partition("\n")[2] if stdout.startswith("guarded=") else stdout
    if view is not None:
        report, stdout = reported(stdout, "placed")
        if report is None:
            raise OSError(f"hoh's script did not place the view: {(stderr or stdout).strip()[-300:]}")
        if report.get("held") is None or report.get("tampered"):
            raise Unplaced(report)
    placed = report if view is not None else None
    if through is not None and "|" not in stdout:  # its python3 failed: nothing was started
        raise OSError(f"hoh's script did not start the attempt: {(stderr or stdout).strip()[-300:]}")
    code, _ = _parsed(stdout)
    if code is not None and guarded and came is not None:
        gathered = stdout.partition("|")[2].strip().partition("\n")[2]
        return _ended(stdout, max_output, begun, leftovers, placed, came, gathered)
    seen = 0
    try:
        while True:
            code, size = _parsed(stdout)
            now = time.monotonic()
            if code is not None:
                return _ended(stdout, max_output, begun, leftovers, placed)
            if size != seen:
                seen, last_activity = size, now
            limit: Limit | None = ("wall" if now - begun > wall else "idle" if now - last_activity > idle
                                   else "output" if size > max_output else None)
            if limit is not None:
                await kill(env, attempt)
                return Ran(None, limit, round(time.monotonic() - begun, 3), leftovers, placed)
            window = max(1.0, min(LOOK_SECONDS, wall - (now - begun), idle - (now - last_activity)))
            _, stdout, _, _ = await _exec(env, through, _wait(attempt, window, max_output), EXEC_TIMEOUT + window)
    except asyncio.CancelledError:
        await env.exec(signal_session(attempt, "KILL"), timeout_sec=EXEC_TIMEOUT)  # hoh was interrupted: not alone on
        raise


def _ended(stdout: str, max_output: int, begun: float, leftovers: int, placed: dict | None,
           came: Came | None = None, gathered: str = "") -> Ran:
    code, size = _parsed(stdout)
    seconds = round(time.monotonic() - begun, 3)
    # A flood that ended before hoh looked is still cut at the cap when it is copied out.
    if size > max_output:
        return Ran(None, "output", seconds, leftovers, placed, came, gathered)
    return Ran(code, None, seconds, leftovers, placed, came, gathered)


async def kill(env: "BaseEnvironment", attempt: Attempt, grace: float = KILL_GRACE_SECONDS) -> None:
    """TERM, a grace period for the CLI to end, then KILL, to the attempt's whole session."""
    await env.exec(f"{signal_session(attempt, 'TERM')}; {_wait(attempt, grace, 2**62)}", timeout_sec=EXEC_TIMEOUT + 10)
    await env.exec(signal_session(attempt, "KILL"), timeout_sec=EXEC_TIMEOUT)


async def collect(env: "BaseEnvironment", attempt: Attempt, steps: str, into: Path,
                  through: Through | None = None, ran: Ran | None = None) -> tuple[Path, str]:
    """Run the collecting `steps` there and bring `outgoing` to `into`: (the streams' dir, the steps' output).
    `ran`: an attempt whose own `exec` collected already (`Ran.came`): only taken apart here."""
    if through is None:
        result = await env.exec(steps, timeout_sec=600)
        await env.download_dir(attempt.outgoing, into)
        return into / "streams", result.stdout or ""
    if ran is not None and ran.came is not None:
        came, text = ran.came, ran.gathered
    else:
        mark = through.channel.mark()
        _, text, _, came = await _exec(env, through, f"{steps}; {printed(mark, attempt.outgoing)}", 600, mark=mark)
    try:
        if came is None:
            raise OSError("no tar came out")
        await asyncio.to_thread(unpack, came.stdout, came.at, into)
    except OSError:  # hoh's script could not pack it (an attempt broke python3): the engine copies it out
        await asyncio.to_thread(shutil.rmtree, into, True)
        await env.download_dir(attempt.outgoing, into)
    return into / "streams", text


def adopt_streams(came: Path, attempt_dir: Path) -> None:
    """An attempt's two streams, as they came out, into its dir (empty where what came is not a plain file)."""
    for name in ("events.jsonl", "stderr.log"):
        source, dest = came / name, attempt_dir / name
        if source.is_file() and not source.is_symlink():
            source.replace(dest)
        else:
            dest.write_bytes(b"")


def left(text: str) -> int:
    """How many processes a collecting step's sweep found left (`left=N`, its first such line)."""
    for line in text.splitlines():
        if line.startswith("left=") and line[5:].isdigit():
            return int(line[5:])
    return 0


def changes_report(text: str) -> dict:
    """`inside.py collect`'s report; Unlisted when there is none."""
    report, _ = reported(text, "collected")
    if report is None:
        raise Unlisted("the environment did not list what changed")
    return report


def result(code: int | None, limit: Literal["wall", "idle", "output"] | None, seconds: float, out: Path,
           err: Path, program: str) -> ProcessResult:
    excerpt = file_excerpt(err)
    spawn_error = None
    if code == NOT_FOUND and out.stat().st_size == 0 and "not found" in excerpt:
        spawn_error = f"{program}: not found in the environment"
    return ProcessResult(code, limit, seconds, out, err, excerpt, spawn_error=spawn_error)
