"""Executable checks: the verified behaviours as a regression suite the Runtime replays itself.

QA may attach a *check* to a criterion or a preserved behaviour it verified: a command, where it runs,
what it reads on stdin, and what it must print and exit with. The Runtime admits a check only after it
reproduced QA's observation on the same candidate (`runtime/replay.py`), and keeps every admitted check in
`state/checks.json` (the register: outside every role's write access), linked to its behaviour. From then
on each loop replays the active checks on the frozen candidate before QA runs, model-free.

Matching is deliberately small and total: an exact compare, a whitespace-normalized compare, a regex
searched in the output (anchor it with ^…$ for the whole), or a JSON subset (every key and list item the
expectation names is in the output; extra ones are fine). A mismatch is a one-line reason, never an
exception, whatever the output holds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from ..errors import StateError
from ..fsutil import atomic_write_text, load_state

CHECKS_SCHEMA_VERSION = 1
MAX_CHECK_SECONDS = 600
MAX_STDIN_BYTES = 1024 * 1024
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class EnvRule:
    """Variables a check's `env` may not set: every name with one of these prefixes or suffixes, or one of these
    names (all compared in upper case), and why."""

    why: str
    prefixes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()

    def refuses(self, name: str) -> bool:
        upper = name.upper()
        return upper.startswith(self.prefixes) or upper.endswith(self.suffixes) or upper in self.names


REFUSED_ENV = (
    EnvRule("the dynamic loader's or libc's: it loads code or data into every program",
            ("LD_", "DYLD_", "GLIBC_", "MALLOC_"),
            ("GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH", "NLSPATH",
             "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR")),
    EnvRule("an interpreter's or a shell's start-up: it runs code before the command",
            ("PYTHON", "PERL", "RUBY", "BASH", "LUA_", "JAVA_", "_JAVA_", "JDK_JAVA_", "DOTNET_", "CORECLR_",
             "COMPLUS_"),
            ("NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "ENV", "SHELLOPTS", "PS4", "PROMPT_COMMAND",
             "IFS", "CDPATH", "GLOBIGNORE", "ZDOTDIR", "CLASSPATH", "PHPRC", "PHP_INI_SCAN_DIR", "TCLLIBPATH")),
    EnvRule("hoh's to set: which programs run, where the home and the scratch dir are",
            names=("PATH", "HOME", "TMPDIR", "SHELL", "EDITOR", "VISUAL", "PAGER", "SSH_ASKPASS", "SUDO_ASKPASS")),
    EnvRule("the network's: a proxy, or the certificates trusted", suffixes=("_PROXY",),
            names=("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")),
    EnvRule("git's: it chooses its config, its programs and its repository", ("GIT_",)),
    EnvRule("hoh's own", ("HOH_",)),
)
"""The variables a check's `env` may not set, by what they are, compared without case. A check's env is applied
inside its jail only (`envs/local/jail.py`); these are refused besides, for every place a check may run (no jail
with `sandbox.mode: off`, a role environment): each makes a program run other code, find other programs or
libraries, or reach the network another way. A check that needs one sets it in its command."""


class Match(str, Enum):
    exact = "exact"
    normalized = "normalized"
    regex = "regex"
    json_subset = "json_subset"


class CheckStatus(str, Enum):
    active = "active"
    retired = "retired"


class RunStatus(str, Enum):
    """How one run of a check ended."""

    passed = "passed"
    failed = "failed"
    """It ran and its exit code or output differs from what QA recorded."""
    flaky = "flaky"
    """It failed and passed on a re-run: shown, never counted as a regression."""
    timed_out = "timed_out"
    error = "error"
    """It could not run at all (the jail failed to start, its stdin file is gone)."""
    skipped = "skipped"
    """Not run: the loop's replay budget was spent."""

    @property
    def broken(self) -> bool:
        """Evidence that the behaviour no longer holds."""
        return self in (RunStatus.failed, RunStatus.timed_out)


@dataclass(frozen=True)
class BrokenCheck:
    """A check that failed on replay: model-free evidence that its behaviour no longer holds."""

    check_id: str
    behaviour_id: str
    evidence: str
    """The run's text file, relative to state/."""
    reason: str


@dataclass(frozen=True)
class Expect:
    exit_code: int = 0
    stdout: str | None = None
    stderr: str | None = None
    match: Match = Match.exact

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Expect":
        return cls(int(data.get("exit_code", 0)), data.get("stdout"), data.get("stderr"),
                   Match(data.get("match", "exact")))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"exit_code": self.exit_code, "match": self.match.value}
        for name in ("stdout", "stderr"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class CheckSpec:
    """One check as QA wrote it (its `stdin_file` made a state path on admission)."""

    command: str
    cwd: str = "."
    """Relative to the candidate's root."""
    stdin: str | None = None
    stdin_file: str | None = None
    """In QA's evidence dir when QA writes it; the copy under state/ once admitted."""
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    expect: Expect = Expect()
    paths: tuple[str, ...] = ()
    """The candidate's files and dirs this behaviour depends on: a change to one puts the check at risk."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CheckSpec":
        return cls(command=data["command"], cwd=data.get("cwd", "."), stdin=data.get("stdin"),
                   stdin_file=data.get("stdin_file"), env=_env_of(data.get("env", {})),
                   timeout_s=float(data.get("timeout_s", 30.0)), expect=Expect.from_json(data.get("expect", {})),
                   paths=tuple(data.get("paths", ())))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.command, "cwd": self.cwd, "timeout_s": self.timeout_s,
                               "expect": self.expect.to_json()}
        if self.stdin is not None:
            out["stdin"] = self.stdin
        if self.stdin_file is not None:
            out["stdin_file"] = self.stdin_file
        if self.env:
            out["env"] = dict(self.env)
        if self.paths:
            out["paths"] = list(self.paths)
        return out

    def touched_by(self, changed: set[str]) -> bool:
        """Whether a changed path is one of this check's paths or lies under (or over) one."""
        for mine in (p.strip("/") for p in self.paths):
            if not mine or mine == ".":
                return bool(changed)
            if any(c == mine or c.startswith(mine + "/") or mine.startswith(c + "/") for c in changed):
                return True
        return False


def _env_of(raw: Any) -> dict[str, str]:
    """A check's env as its JSON has it; one that is no object is kept as it came (a hand in the register may have
    written anything), so the run refuses it with its reason (`env_problems`) instead of running without it."""
    return dict(raw) if isinstance(raw, Mapping) else raw


def env_refusal(name: str) -> str | None:
    """Why a check may not set the variable `name` (`REFUSED_ENV`); None when it may."""
    return next((rule.why for rule in REFUSED_ENV if rule.refuses(name)), None)


def env_problems(env: Any) -> list[str]:
    """What is wrong with a check's `env`, whoever wrote it (QA, or a hand in `state/checks.json`): each a line
    the re-ask or a run's error says. Empty when every name is a shell name hoh lets a check set, and every
    value a string an environment can hold."""
    if not isinstance(env, Mapping):
        return ["check env must be an object of names and strings"]
    problems = []
    if bad := sorted(repr(n) for n in env if not isinstance(n, str) or not ENV_NAME.match(n)):
        problems.append(f"check env names must be shell names; not: {', '.join(bad)}")
    if bad := sorted(n for n, v in env.items() if isinstance(n, str) and (not isinstance(v, str) or "\0" in v)):
        problems.append(f"check env values must be strings without a NUL character; not those of: {', '.join(bad)}")
    refused: dict[str, list[str]] = {}
    for name in env:
        if isinstance(name, str) and ENV_NAME.match(name) and (why := env_refusal(name)) is not None:
            refused.setdefault(why, []).append(name)
    problems += [f"check env may not set {', '.join(sorted(names))}: the variable is {why}; if the check needs "
                 "it, set it inside its command" for why, names in refused.items()]
    return problems


def spec_errors(spec: Mapping[str, Any], where: str) -> list[str]:
    """What the schema cannot say about a check, as re-ask messages."""
    errors = []
    for name in ("cwd", *spec.get("paths", ())):
        path = Path(spec.get("cwd", ".") if name == "cwd" else name)
        if path.is_absolute() or ".." in path.parts:
            errors.append(f"{where}: check path '{path}' must be relative to the candidate's root, without '..'")
    if "stdin" in spec and "stdin_file" in spec:
        errors.append(f"{where}: a check gives stdin inline or as stdin_file, not both")
    if (stdin := spec.get("stdin")) is not None and len(stdin.encode()) > MAX_STDIN_BYTES:
        errors.append(f"{where}: inline stdin is over {MAX_STDIN_BYTES // 1024} KiB; save it as a stdin_file")
    errors += [f"{where}: {problem}" for problem in env_problems(spec.get("env", {}))]
    expect = spec.get("expect", {})
    if expect.get("match") == "regex":
        for stream in ("stdout", "stderr"):
            if (pattern := expect.get(stream)) is not None:
                try:
                    re.compile(pattern)
                except re.error as err:
                    errors.append(f"{where}: expect.{stream} is not a valid regex ({err})")
    if expect.get("match") == "json_subset":
        for stream in ("stdout", "stderr"):
            if (text := expect.get(stream)) is not None:
                try:
                    json.loads(text)
                except ValueError:
                    errors.append(f"{where}: expect.{stream} must be JSON text for match json_subset")
    return errors


def _json_subset(want: Any, got: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _json_subset(v, got[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and all(any(_json_subset(w, g) for g in got) for w in want)
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got  # True is not 1 in a JSON document
    return want == got


def _stream_mismatch(name: str, want: str, got: str, mode: Match) -> str | None:
    if mode is Match.exact:
        ok = want.rstrip("\n") == got.rstrip("\n")
    elif mode is Match.normalized:
        ok = " ".join(want.split()) == " ".join(got.split())
    elif mode is Match.regex:
        ok = re.search(want, got, re.MULTILINE) is not None
    else:
        try:
            ok = _json_subset(json.loads(want), json.loads(got))
        except ValueError:
            return f"{name} is not JSON"
    return None if ok else f"{name} does not match ({mode.value}): expected {want[:80]!r}, got {got[:80]!r}"


def mismatch(expect: Expect, exit_code: int | None, stdout: str, stderr: str) -> str | None:
    """Why this run does not show what the check expects, or None when it does."""
    if exit_code != expect.exit_code:
        return f"exit code {exit_code}, expected {expect.exit_code}"
    for name, want, got in (("stdout", expect.stdout, stdout), ("stderr", expect.stderr, stderr)):
        if want is not None and (reason := _stream_mismatch(name, want, got, expect.match)):
            return reason
    return None


def _identity(spec: CheckSpec) -> tuple:
    env = tuple(sorted(spec.env.items(), key=repr)) if isinstance(spec.env, Mapping) else repr(spec.env)
    return spec.command, spec.cwd, spec.stdin, spec.stdin_file, env, spec.expect


class CheckRegister:
    """state/checks.json: every admitted check, its behaviour, its status and its last replays.

    Folded once per loop in the evidence step, with `applied_through` like the ledger, so a crash between
    its save and the journal entry never applies a loop twice."""

    def __init__(self, data: dict[str, Any] | None = None):
        self.data = data or {"schema_version": CHECKS_SCHEMA_VERSION, "applied_through": 0, "checks": []}
        self._by_id = {c["id"]: c for c in self.data["checks"]}

    @classmethod
    def load(cls, path: Path) -> "CheckRegister":
        if not path.exists():
            return cls()
        data = load_state(path, ("schema_version", "checks"), CHECKS_SCHEMA_VERSION)
        if not isinstance(data["checks"], list) or not all(isinstance(c, dict) and {"id", "spec", "status"} <= c.keys()
                                                         for c in data["checks"]):
            raise StateError(f"{path}: corrupt check register; nothing was overwritten")
        return cls(data)

    def save(self, path: Path) -> None:
        head = {k: v for k, v in self.data.items() if k != "checks"}
        rows = ",\n".join(json.dumps(c, ensure_ascii=False) for c in self.data["checks"])
        atomic_write_text(path, json.dumps(head)[:-1] + (f', "checks": [\n{rows}\n]}}\n' if rows else ', "checks": []}\n'))

    @property
    def checks(self) -> list[dict[str, Any]]:
        return self.data["checks"]

    @property
    def applied_through(self) -> int:
        return self.data.get("applied_through", 0)

    def get(self, check_id: str) -> dict[str, Any] | None:
        return self._by_id.get(check_id)

    def active(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c["status"] == CheckStatus.active.value]

    def active_ids(self) -> set[str]:
        return {c["id"] for c in self.active()}

    def next_id(self, offset: int = 0) -> str:
        return f"C-{len(self.checks) + 1 + offset:04d}"

    def same(self, spec: CheckSpec) -> str | None:
        """The active check that runs this command with this expectation already, if any."""
        for c in self.active():
            if _identity(CheckSpec.from_json(c["spec"])) == _identity(spec):
                return c["id"]
        return None

    # ---- the evidence step's fold -----------------------------------------------------------------
    def add(self, check_id: str, behaviour_id: str | None, spec: CheckSpec, loop: int, item: str,
            network: str) -> None:
        check = {"id": check_id, "behaviour_id": behaviour_id, "status": CheckStatus.active.value,
                 "spec": spec.to_json(), "added": {"loop": loop, "item": item}, "network": network, "history": []}
        self.checks.append(check)
        self._by_id[check_id] = check

    def retire(self, check_id: str, loop: int, reason: str) -> None:
        check = self._by_id[check_id]
        check["status"] = CheckStatus.retired.value
        check["retired"] = {"loop": loop, "reason": reason}

    def record_replay(self, check_id: str, loop: int, candidate_id: str, status: RunStatus) -> None:
        if (check := self._by_id.get(check_id)) is not None:
            check["history"].append({"loop": loop, "candidate_id": candidate_id, "status": status.value})
            del check["history"][:-20]  # the last replays; each loop's replay.json keeps the rest
            check["last_replayed"] = loop
