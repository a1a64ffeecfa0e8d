"""An unprivileged user to run tests as, when pytest runs as root (CI does).

`setup(repo)` makes sure the system user `hoh-tester` exists, gives it a copy of the checkout it owns
and a venv it can run, and returns them as a `UserEnv`. Everything is cached under `BASE`, so a rerun
reuses it:

    /tmp/hoh-as-user/              owned by the user, 0755
        src-<hash of the sources>/ the copy: hoh/, prompts/, schemas/, tests/, ... (git's tracked and
                                   untracked-but-not-ignored files; no .git, venvs, tools or caches)
        venv-<hash of pyproject>/  /usr/bin/python3's venv (keyed by pyproject.toml and the Python's
                                   version) with hoh's dependencies, pytest and pytest-xdist; hoh
                                   itself runs from the copy (PYTHONPATH), so a change of the
                                   sources needs a new copy, never a new venv
    /tmp/hoh-u-*/                  one TMPDIR per run as the user (kept short: unix socket paths)
    /tmp/hoh-as-user.lock          flock'ed while preparing, so pytest-xdist workers may race

What is missing (no useradd, no PyPI, ...) is a skip naming it, or a failure when `HOH_CI` is set.
Not running as root is always a skip: the normal run already is unprivileged.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

USER = "hoh-tester"
BASE = Path("/tmp/hoh-as-user")
LOCK = Path("/tmp/hoh-as-user.lock")
PYTHON = Path("/usr/bin/python3")
"""A Python every user can run (the pyenv one under /root is not)."""
SOURCES = ("hoh", "prompts", "schemas", "tests", "examples", "adapters", "benchmarks", "pyproject.toml", "README.md")
SKIPPED_PARTS = {".git", "__pycache__", ".pytest_cache", "node_modules", ".hoh-tools"}
TEST_TOOLS = ("pytest", "pytest-xdist")
"""Taken from the `test` extra; the rest of it (playwright, matplotlib) no hostile test needs."""
STALE_SECONDS = 3600
"""Copies of older sources unused this long are removed (a session still running uses its own)."""
INSTALL_TIMEOUT = 600
RUN_PREFIX = "hoh-u-"


class Unavailable(Exception):
    """What stops the unprivileged run on this machine, in one line."""


@dataclass(frozen=True)
class UserEnv:
    """The user, the copy of the checkout it owns and the Python of its venv."""

    user: str
    uid: int
    gid: int
    home: Path
    checkout: Path
    python: Path
    groups: tuple[int, ...] = ()
    """Its supplementary groups: none, whatever /etc/group says (a docker group is root's power), unless a tier
    gives one (`unprivileged_harbor.py`: the engine socket's)."""

    def command(self, *argv: str | Path) -> list[str]:
        """`argv` run as the user: its uid, gid and `groups`; no capabilities are left once uid 0 is gone."""
        groups = f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups"
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", groups, "--", *map(str, argv)]

    def environ(self, tmpdir: Path, **extra: str) -> dict[str, str]:
        """A clean environment: nothing of root's (no secrets), the venv first on PATH, hoh from the copy."""
        return {"HOME": str(self.home), "USER": self.user, "LOGNAME": self.user, "SHELL": "/bin/bash",
                "PATH": f"{self.python.parent}:/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "200",
                "TMPDIR": str(tmpdir), "PYTHONPATH": str(self.checkout), **extra}

    def tmpdir(self) -> Path:
        """A fresh TMPDIR the user owns; a short path, as a unix socket's must stay under 108 bytes."""
        path = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir="/tmp"))
        os.chown(path, self.uid, self.gid)
        return path


def setup(repo: Path) -> UserEnv:
    """The user, its copy of `repo` and its venv, made or reused (for a session-scoped fixture)."""
    if os.geteuid() != 0:
        pytest.skip("not running as root: the normal run already is unprivileged")
    try:
        with _locked():
            return _prepare(repo)
    except (Unavailable, OSError) as err:
        give_up(f"the run as {USER} is not possible here: {err}")


def give_up(message: str) -> NoReturn:
    """A skip naming what is missing, or a failure under CI (`HOH_CI`), where nothing may be missing."""
    if os.environ.get("HOH_CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class _locked:
    def __init__(self, path: Path = LOCK):
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _prepare(repo: Path) -> UserEnv:
    for tool in ("setpriv", "useradd"):
        if shutil.which(tool) is None:
            raise Unavailable(f"`{tool}` is not installed (util-linux / passwd)")
    entry = _ensure_user()
    _ensure_base(entry)
    files = _read_sources(repo)
    checkout = _ensure_copy(files, entry)
    python = _ensure_venv(checkout, entry)
    _prune(keep={checkout, python.parents[1]})
    return UserEnv(USER, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir), checkout, python)


def _ensure_user() -> pwd.struct_passwd:
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        made = _run(["useradd", "--system", "--create-home", "--shell", "/bin/bash", USER], timeout=60)
        if made.returncode != 0:
            raise Unavailable(f"`useradd {USER}` failed: {made.stderr.strip()}") from None
        entry = pwd.getpwnam(USER)
    if entry.pw_uid == 0:
        raise Unavailable(f"the user {USER} has uid 0")
    home = Path(entry.pw_dir)
    if not home.is_dir():
        home.mkdir(mode=0o755, parents=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return entry


def _ensure_base(entry: pwd.struct_passwd) -> None:
    """BASE is a real directory of root's or the user's that nobody else can write to."""
    try:
        BASE.mkdir(mode=0o755)
    except FileExistsError:
        pass
    info = BASE.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, entry.pw_uid) or info.st_mode & 0o022:
        raise Unavailable(f"{BASE} exists but is not a directory only root or {USER} can write to; remove it")
    os.chown(BASE, entry.pw_uid, entry.pw_gid)
    os.chmod(BASE, 0o755)


def _read_sources(repo: Path) -> dict[str, tuple[str, bytes]]:
    """relative path -> (kind, content): the files git would track, read once (what is hashed is what is copied)."""
    names = _source_names(repo)
    files: dict[str, tuple[str, bytes]] = {}
    for name in sorted(names):
        path = repo / name
        if path.is_symlink():
            files[name] = ("link", os.readlink(path).encode())
        elif path.is_file():
            files[name] = ("exec" if os.access(path, os.X_OK) else "file", path.read_bytes())
    if "pyproject.toml" not in files or not any(n.startswith("hoh/") for n in files):
        raise Unavailable(f"{repo} does not look like the hoh checkout (no pyproject.toml or hoh/)")
    return files


def _source_names(repo: Path) -> set[str]:
    if (repo / ".git").exists() and shutil.which("git"):
        listed = _run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                       *SOURCES], timeout=60)
        if listed.returncode == 0:
            return {n for n in listed.stdout.split("\0") if n and not SKIPPED_PARTS & set(Path(n).parts)}
    names = set()
    for top in SOURCES:
        paths = [repo / top] if (repo / top).is_file() else (repo / top).rglob("*")
        for path in paths:
            rel = path.relative_to(repo)
            if not SKIPPED_PARTS & set(rel.parts) and path.suffix != ".pyc" and not path.is_dir():
                names.add(str(rel))
    return names


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:16]


def _ensure_copy(files: dict[str, tuple[str, bytes]], entry: pwd.struct_passwd) -> Path:
    digest = _digest(*(p for name, (kind, data) in files.items() for p in (name.encode(), kind.encode(), data)))
    dest = BASE / f"src-{digest}"
    if dest.is_dir() and not dest.is_symlink():
        os.utime(dest)
        return dest
    # Written into a fresh directory of an unguessable name, handed to the user, then renamed in whole.
    staging = Path(tempfile.mkdtemp(prefix=".src-", dir=BASE))
    for name, (kind, data) in files.items():
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            os.symlink(data.decode(), path)
        else:
            path.write_bytes(data)
            path.chmod(0o755 if kind == "exec" else 0o644)
    for path in [staging, *staging.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    staging.rename(dest)
    return dest


def _ensure_venv(checkout: Path, entry: pwd.struct_passwd) -> Path:
    project = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]
    tools = [r for r in project.get("optional-dependencies", {}).get("test", [])
             if re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() in TEST_TOOLS]
    requirements = [*project.get("dependencies", []), *(tools or TEST_TOOLS)]
    version = _run([str(PYTHON), "-c", "import sys; print(sys.version)"], timeout=60)
    if version.returncode != 0:
        raise Unavailable(f"{PYTHON} does not run: {version.stderr.strip()}")
    venv = BASE / f"venv-{_digest((checkout / 'pyproject.toml').read_bytes(), version.stdout.encode())}"
    as_user = UserEnv(USER, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir), checkout, venv / "bin" / "python")
    install_venv(as_user, PYTHON, venv, requirements, INSTALL_TIMEOUT)
    return as_user.python


def install_venv(user: UserEnv, base: Path, venv: Path, requirements: list[str], timeout: float) -> None:
    """`venv`, made by the user from `base` with `requirements` installed, unless it is there ready already."""
    ready = venv / ".hoh-ready"
    if ready.is_file():
        os.utime(venv)
        return
    shutil.rmtree(venv, ignore_errors=True)
    # pip's own settings (a mirror, a certificate, a proxy) are passed on for the install only.
    pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.lower().endswith("_proxy")}
    env = {**user.environ(Path("/tmp")), **pip_env}
    del env["PYTHONPATH"]
    steps = [([base, "-m", "venv", venv], f"`{base} -m venv` (is python3-venv installed?)"),
             ([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               *requirements], f"`pip install` of {', '.join(requirements)} (is PyPI reachable?)")]
    for argv, what in steps:
        done = _run(user.command(*argv), env=env, cwd=user.checkout, timeout=timeout)
        if done.returncode != 0:
            tail = "\n".join((done.stderr + done.stdout).strip().splitlines()[-15:])
            raise Unavailable(f"{what} failed as {USER} (exit {done.returncode}):\n{tail}")
    mark(ready, " ".join(requirements) + "\n")


def mark(path: Path, text: str) -> None:
    """Root writes `path` in a directory the user owns: a new file, never through a link the user left there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _prune(keep: set[Path]) -> None:
    """Copies and venvs of other sources nobody used for STALE_SECONDS, left-over staging dirs, old TMPDIRs."""
    for path in [*BASE.iterdir(), *Path("/tmp").glob(RUN_PREFIX + "*")]:
        if path in keep or not path.name.startswith(("src-", "venv-", ".src-", "harbor-", RUN_PREFIX)) \
                or path.is_symlink():
            continue
        if time.time() - path.lstat().st_mtime > STALE_SECONDS:
            shutil.rmtree(path, ignore_errors=True)


def _run(argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, **kwargs)
    except OSError as err:
        raise Unavailable(f"`{argv[0]}` cannot start: {err}") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"`{' '.join(argv)}` took over {timeout:.0f}s") from None
