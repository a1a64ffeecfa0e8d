"""Getting hoh and a harness CLI into a task environment, offline.

hoh goes in as a plain site dir on PYTHONPATH (Debian's minimal python3 has neither venv nor
pip): its own package copied from this installation, and its dependencies installed on the host
with `pip install --target` for the environment's Python version and platform, cached on the
host, so the environment itself never needs a network. A harness CLI that is one native binary
on this machine (opencode) is uploaded as it is; a Node.js one (pi) is installed with the
image's own npm; anything else is a one-line error naming what the image lacks.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment
from packaging.requirements import Requirement

import hoh

from ..errors import TaskEnvironmentError
from ..harness.base import HarnessAdapter
from ..harness.process import call
from ..resources import resource_dir

ROOT = PurePosixPath("/opt/hoh")
SITE, BIN, RUN = ROOT / "site", ROOT / "bin", ROOT / "run"
MIN_PYTHON = (3, 11)

PROBE = """
import json, os, platform, shutil, sys
print(json.dumps({"python": list(sys.version_info[:3]), "machine": platform.machine(),
                  "libc": list(platform.libc_ver()), "git": bool(shutil.which("git")),
                  "npm": bool(shutil.which("npm")), "cwd": os.getcwd()}))
"""


@dataclass(frozen=True)
class EnvironmentFacts:
    """What the task environment offers hoh, read by running its python3 once."""

    python: tuple[int, int, int]
    machine: str
    glibc: str | None
    git: bool
    npm: bool
    cwd: str
    """The default working directory of a command: the image's WORKDIR, or `[environment] workdir`."""

    @property
    def python_tag(self) -> str:
        return f"{self.python[0]}.{self.python[1]}"


async def probe(environment: BaseEnvironment) -> EnvironmentFacts:
    result = await environment.exec(f"command -v python3 >/dev/null || exit 127; python3 -c {shlex.quote(PROBE)}",
                                    timeout_sec=120)
    if result.return_code == 127:
        raise TaskEnvironmentError("the task environment has no python3; hoh runs inside it and needs Python >= 3.11 "
                                   "and git there: use an image that has them (e.g. Debian bookworm's python3 and git)")
    try:
        data = json.loads((result.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        detail = ((result.stderr or result.stdout or "").strip().splitlines() or ["no output"])[-1]
        raise TaskEnvironmentError(f"the task environment's python3 did not run ({detail}); hoh needs a working "
                                   "Python >= 3.11 there") from None
    libc, version = data["libc"]
    facts = EnvironmentFacts(tuple(data["python"]), data["machine"], version if libc == "glibc" else None,
                             data["git"], data["npm"], data["cwd"])
    check(facts)
    return facts


def check(facts: EnvironmentFacts) -> None:
    if facts.python[:2] < MIN_PYTHON:
        raise TaskEnvironmentError(f"the task environment's python3 is {'.'.join(map(str, facts.python))}; hoh needs "
                                   "Python >= 3.11 there: use an image with a newer python3")
    if not facts.git:
        raise TaskEnvironmentError("the task environment has no git; hoh keeps the project's history with it: "
                                   "add git to the task's image")
    if facts.glibc is None:
        raise TaskEnvironmentError(f"the task environment's C library is not glibc ({facts.machine}); hoh uploads "
                                   "its dependencies as manylinux wheels, which need a glibc-based image")


# ---- hoh and its dependencies ------------------------------------------------------------------
def core_requirements(python_tag: str) -> list[str]:
    """hoh's own dependencies (no extras) that apply to the environment's Python."""
    found = []
    for text in importlib.metadata.requires("hoh") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"python_version": python_tag, "extra": ""}):
            found.append(str(req.specifier and f"{req.name}{req.specifier}" or req.name))
    return sorted(found)


def platform_tags(facts: EnvironmentFacts) -> list[str]:
    """Every manylinux tag the environment's glibc can load, newest first."""
    major, minor = (int(x) for x in facts.glibc.split(".")[:2])
    tags = [f"manylinux_{major}_{m}_{facts.machine}" for m in range(minor, 16, -1)]
    return tags + [f"manylinux2014_{facts.machine}"]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hoh" / "harbor"


def dependency_site(facts: EnvironmentFacts, cache: Path | None = None) -> Path:
    """A site dir holding hoh's dependencies for the environment's Python, built once per
    (requirements, Python, platform) and kept in the host's cache."""
    reqs, tags = core_requirements(facts.python_tag), platform_tags(facts)
    key = hashlib.sha256(json.dumps([reqs, facts.python_tag, tags]).encode()).hexdigest()[:16]
    cache = cache or cache_root()
    dest = cache / f"site-py{facts.python_tag}-{facts.machine}-{key}"
    if dest.is_dir():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".site-"))
    abi = "cp" + facts.python_tag.replace(".", "")
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
            "--target", str(staging), "--python-version", facts.python_tag, "--implementation", "cp",
            "--abi", abi, "--abi", "abi3", "--abi", "none", "--only-binary=:all:",
            *(f"--platform={tag}" for tag in tags), *reqs]
    result = call(argv, timeout=900)
    if not result.ok:
        shutil.rmtree(staging, ignore_errors=True)
        detail = (result.stderr.strip().splitlines() or ["pip timed out" if result.exit_code is None else "pip failed"])[-1]
        raise TaskEnvironmentError(f"cannot get hoh's dependencies for the task's Python {facts.python_tag} "
                                   f"({detail}); run once with PyPI reachable from this machine (they are cached "
                                   f"in {cache})")
    try:
        os.rename(staging, dest)
    except OSError:  # another trial built the same site meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def stage_hoh(dest: Path) -> None:
    """This installation's hoh package, with the prompts and schemas it loads, under dest/hoh."""
    package = Path(hoh.__file__).resolve().parent
    shutil.copytree(package, dest / "hoh", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("prompts", "schemas"):
        if not (dest / "hoh" / name).is_dir():  # a source checkout keeps them beside the package
            shutil.copytree(resource_dir(name), dest / "hoh" / name)


async def install_hoh(environment: BaseEnvironment, facts: EnvironmentFacts) -> None:
    site = dependency_site(facts)
    await environment.exec(f"mkdir -p {SITE} {BIN} {RUN}", user="root", timeout_sec=60)
    await environment.upload_dir(site, str(SITE))
    with tempfile.TemporaryDirectory(prefix="hoh-stage-") as tmp:
        stage_hoh(Path(tmp))
        await environment.upload_dir(tmp, str(SITE))
    result = await environment.exec(f"PYTHONPATH={SITE} python3 -c 'import hoh.taskrun.driver'", timeout_sec=120)
    if result.return_code != 0:
        detail = ((result.stderr or result.stdout or "").strip().splitlines() or ["no output"])[-1]
        raise TaskEnvironmentError(f"hoh does not import in the task environment ({detail})")


# ---- the harness CLI ---------------------------------------------------------------------------
def _is_elf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"\x7fELF"


def native_cli(adapter: HarnessAdapter, search_path: str) -> Path | None:
    """The harness CLI on this machine when it is one native executable that can be uploaded."""
    found = shutil.which(adapter.command, path=search_path)
    if found is None:
        return None
    real = Path(found).resolve()
    return real if _is_elf(real) else None


async def install_harness(environment: BaseEnvironment, adapter: HarnessAdapter, facts: EnvironmentFacts,
                          search_path: str) -> None:
    """Make the adapter's CLI runnable as its executable on the environment's PATH (with BIN first)."""
    caps = adapter.capabilities
    if caps.ships_with_hoh:
        return  # uploaded with hoh's own package
    binary = native_cli(adapter, search_path)
    if binary is not None:
        await environment.upload_file(binary, str(BIN / caps.executable))
        await environment.exec(f"chmod 755 {BIN / caps.executable}", user="root", timeout_sec=60)
        return
    spec = caps.npm_spec
    if spec is None:
        raise TaskEnvironmentError(f"the {adapter.name} harness cannot be installed in the task environment: its CLI "
                                   f"({adapter.command}) is not one native binary here and its adapter names no npm "
                                   "package; use an image that has the CLI installed")
    if not facts.npm:
        where = shutil.which(adapter.command, path=search_path) or "not installed on this machine"
        raise TaskEnvironmentError(
            f"the {adapter.name} harness cannot be installed in the task environment offline: its CLI here is not one "
            f"native binary ({where}) and the image has no npm to install {spec}; use an image with Node.js >= 20 "
            "and npm (and a network to the npm registry), or a harness whose CLI is one binary (opencode)")
    result = await environment.exec(f"npm install -g --no-audit --no-fund {shlex.quote(spec)}", user="root",
                                    timeout_sec=900)
    if result.return_code != 0:
        detail = ((result.stderr or result.stdout or "").strip().splitlines() or ["no output"])[-1]
        raise TaskEnvironmentError(f"the task image's npm could not install {spec} ({detail}); the {adapter.name} "
                                   "harness needs the npm registry reachable from the task environment")
