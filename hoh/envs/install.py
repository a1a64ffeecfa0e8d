"""What hoh puts into a role's environment when it starts: the supervisor and the harness's program.

The scripted harness needs only a `python3` there: hoh copies in the scripted agent and the pure-Python
part of PyYAML as a plain site dir (`SITE`), nothing installed by hand.

A CLI harness is installed by hoh at the adapter's pinned version, without any network in the environment:
`npm install` of the pinned spec runs on THIS machine (`node.py`, cached), and the result is uploaded under
`/opt/hoh/cli/NAME-VERSION`, with a shim `/opt/hoh/bin/EXECUTABLE` (first on the attempt's PATH) that runs it.
A CLI that is one native program (OpenCode, Claude Code) goes in alone; a Node one (Pi, Codex's npm wrapper
with its native package) goes in as its `node_modules`, run by the image's Node when it is >= 20.6 and else
by a Node hoh uploads too (`/opt/hoh/node`, kept off PATH so the project's own commands see the image as it
is). An image whose CLI already reports the pinned version keeps its own (as Harbor's installers do). The
shim points Node and npm at the image's CA bundle (a re-signing egress is trusted only through it).

Before anything large goes in, the programs' ELF headers are checked against the image's architecture and C
library; after, the CLI must answer `--version` with the pinned version there. Every failure is one line with
its real cause (`EnvironmentUnavailable`, exit 2). Nothing from the environment is ever run on this machine:
only its printed facts are read, as text.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..errors import EnvironmentUnavailable
from ..harness.attempt import HOH_PACKAGE
from . import node
from .egress import route as network
from .elf import ElfNeeds, is_elf, read_needs
from .supervise import ROOT, SUPERVISOR, SUPERVISOR_PATH

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.base import HarnessAdapter

SITE = f"{ROOT}/site"
BIN = f"{ROOT}/bin"
FORWARDER = f"{ROOT}/egress_shim.py"
"""hoh's loopback forwarder to its proxy's socket, in a closed environment (run by the image's python3)."""
NODE = f"{ROOT}/node/bin/node"
SCRIPTED_AGENT = ("__init__.py", "testing/__init__.py", "testing/scripted_agent.py")
"""The part of hoh's package the scripted agent runs from (it imports nothing else of hoh)."""
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""Where the image's own programs are looked for (never hoh's /opt/hoh/bin)."""
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
UPLOAD_TIMEOUT = 1800
NO_PROXY_GATEWAY = [
    # The model endpoint is hoh's egress proxy itself, on the gateway (HTTP_PROXY's host). A client that tunnels
    # every request through HTTP_PROXY (Node's undici sends CONNECT even for http://) would ask the proxy to
    # tunnel to itself, which it refuses as an unlisted host; so the CLI reaches its endpoint directly, as it
    # reaches 127.0.0.1 on this machine. (No weaker: a container reaches its gateway whatever NO_PROXY says.)
    'case "${HTTP_PROXY:-}" in http://*:*)',
    '  _hoh_gw=${HTTP_PROXY#http://}; _hoh_gw=${_hoh_gw%%:*}',
    '  NO_PROXY="${NO_PROXY:+$NO_PROXY,}$_hoh_gw"; no_proxy=$NO_PROXY; export NO_PROXY no_proxy; unset _hoh_gw ;;',
    "esac",
]

PROBE = """
echo "machine=$(uname -m)"
if ls /lib/ld-musl-* >/dev/null 2>&1; then echo "libc=musl"
else echo "libc=$(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1)"; fi
for f in {bundles}; do if [ -f "$f" ]; then echo "ca=$f"; break; fi; done
n=$(PATH={path} command -v node) && echo "node=$n" && echo "node_version=$("$n" --version 2>&1 | head -n 1)"
c=$(PATH={path} command -v {exe}) && echo "cli=$c" && echo "cli_version=$("$c" --version 2>&1 | head -n 1)"
true
"""


@dataclass(frozen=True)
class ImageFacts:
    """What the image offers a harness program, as its shell printed it (text only, never run here)."""

    machine: str
    libc: str
    """"glibc", "musl" or "unknown"."""
    glibc: tuple[int, int] | None
    ca_bundle: str | None
    node: str | None
    node_version: tuple[int, int, int] | None
    cli_version: tuple[int, int, int] | None

    @classmethod
    def parse(cls, text: str) -> "ImageFacts":
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        libc_line = fields.get("libc", "")
        glibc = node.parse_version(libc_line + ".0") if "musl" not in libc_line else None
        libc = "musl" if libc_line == "musl" else "glibc" if glibc else "unknown"
        return cls(machine=fields.get("machine", "unknown").strip(), libc=libc,
                   glibc=glibc[:2] if glibc else None, ca_bundle=fields.get("ca") or None,
                   node=fields.get("node") or None, node_version=node.parse_version(fields.get("node_version", "")),
                   cli_version=node.parse_version(fields.get("cli_version", "")))

    def describe(self) -> str:
        libc = f"glibc {self.glibc[0]}.{self.glibc[1]}" if self.glibc else self.libc
        return f"{self.machine}, {libc}"


def scripted_site(into: Path) -> None:
    """hoh's scripted agent and PyYAML's Python modules (no compiled extension: any Python 3 runs them)."""
    for rel in SCRIPTED_AGENT:
        dest = into / "hoh" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HOH_PACKAGE / rel, dest)
    shutil.copytree(Path(yaml.__file__).parent, into / "yaml", ignore=shutil.ignore_patterns("*.so", "__pycache__"))


def away_from_home(command: str) -> str:
    """`command` with a HOME of its own under /tmp, removed after: a CLI asked only its version may still write
    its caches and settings under HOME (OpenCode makes ~/.cache, ~/.config and ~/.local/share/opencode), and
    the image's HOME is outside every path a role may write, so the checks between attempts would take what
    hoh's own probe wrote for a role's tampering and replace the environment, which installs the CLI again."""
    return ('_hoh_home=$(mktemp -d /tmp/hoh-home.XXXXXX) || exit 3; '
            f'_hoh_out=$(HOME="$_hoh_home" sh -c {shlex.quote(command)}); _hoh_code=$?; '
            'rm -rf "$_hoh_home"; printf "%s\\n" "$_hoh_out"; exit $_hoh_code')


async def _run(env: "BaseEnvironment", command: str, timeout: int = 120) -> tuple[int, str]:
    result = await env.exec(command, timeout_sec=timeout)
    return result.return_code, ((result.stdout or "") + (result.stderr or "")).strip()


def _last_line(output: str) -> str:
    return " ".join((output.strip().splitlines() or ["no output"])[-1].split())[:300]


Programs = dict[str, bytes]
"""hoh's small programs in an environment (its path there: its content), which decide how an attempt runs and
what its outcome is: put in afresh before every attempt (`hoh/envs/verify.py`)."""


async def install_harness(env: "BaseEnvironment", adapter: "HarnessAdapter") -> Programs:
    """Install what the harness runs there; returns hoh's programs (the supervisor, a shim on PATH)."""
    code, output = await _run(env, f"mkdir -p {BIN} {ROOT}/attempts && for p in wc head kill date sleep; "
                                  'do command -v "$p" >/dev/null || { echo "no $p"; exit 3; }; done')
    if code != 0:
        raise EnvironmentUnavailable(f"the environment's image lacks a POSIX shell with wc, head, kill, date and sleep ({output}); "
                                     "use an image that has them (every Debian or Ubuntu image does)")
    with tempfile.TemporaryDirectory(prefix="hoh-env-site-") as tmp:
        script = Path(tmp, "supervise.sh")
        script.write_text(SUPERVISOR)
        await env.upload_file(script, SUPERVISOR_PATH)
        if adapter.capabilities.ships_with_hoh:
            code, _ = await _run(env, "command -v python3")
            if code != 0:
                raise EnvironmentUnavailable(f"the {adapter.name} harness runs hoh's own agent, which needs a python3 "
                                             "in the environment's image; use an image that has one")
            scripted_site(Path(tmp, "site"))
            await env.upload_dir(Path(tmp, "site"), SITE)
            # Compiled there, once, by the image's own python3: every CLI runs with PYTHONDONTWRITEBYTECODE, so
            # without it each attempt compiled PyYAML and the agent again (~70 ms; locally they come compiled).
            await _run(env, f"python3 -m compileall -q {SITE} >/dev/null 2>&1; true")
            return {SUPERVISOR_PATH: SUPERVISOR.encode()}
    return {SUPERVISOR_PATH: SUPERVISOR.encode(), **await install_cli(env, adapter)}


async def install_forwarder(env: "BaseEnvironment") -> Programs | None:
    """Put hoh's forwarder (a standard-library script) in; None when the image has no python3 to run it."""
    code, _ = await _run(env, f"PATH={IMAGE_PATH} command -v python3")
    if code != 0:
        return None
    await env.upload_file(network.SHIM, FORWARDER)
    return {FORWARDER: network.SHIM.read_bytes()}


async def install_cli(env: "BaseEnvironment", adapter: "HarnessAdapter") -> Programs:
    """The CLI at its pinned version (or the image's own); returns its shim on PATH, if hoh wrote one."""
    caps = adapter.capabilities
    if adapter.config.command or not caps.npm_spec or not caps.executable:
        # A command of the user's own (`harness.command`), or a CLI hoh knows no package of: the image has it.
        code, _ = await _run(env, f"PATH={BIN}:{IMAGE_PATH}:$PATH command -v {shlex.quote(adapter.command)}")
        if code != 0:
            raise EnvironmentUnavailable(f"{adapter.name}: '{adapter.command}' is not installed in the environment's "
                                         f"image; add it to the image ({caps.install_hint})")
        return {}
    exe, pinned = caps.executable, node.parse_version(caps.tested_version or "")
    code, output = await _run(env, away_from_home(PROBE.format(bundles=" ".join(CA_BUNDLES), path=IMAGE_PATH,
                                                                exe=shlex.quote(exe))))
    facts = ImageFacts.parse(output)
    if code != 0 or facts.machine == "unknown":
        raise EnvironmentUnavailable(f"{adapter.name}: the environment's shell did not answer hoh's probe "
                                     f"({_last_line(output)})")
    if pinned is not None and facts.cli_version == pinned:
        return {}  # the image's own CLI, at the version hoh is tested with
    prefix = await asyncio.to_thread(node.npm_install, caps.npm_spec)
    entry = node.bin_entry(prefix, caps.npm_package or "", exe).resolve()
    home = f"{ROOT}/cli/{adapter.name}-{caps.tested_version}"
    programs: list[tuple[Path, str]] = []
    """(file here, its path there): made executable there."""
    tree: Path | None = None
    if is_elf(entry):
        _check(adapter, f"its {exe} binary", read_needs(entry), facts)
        programs.append((entry, f"{home}/{exe}"))
        command = f"{home}/{exe}"
    else:
        runtime = await _node_for(adapter, facts, programs)
        tree = prefix / "node_modules"
        command = f"{shlex.quote(runtime)} {shlex.quote(home + '/' + str(entry.relative_to(prefix.resolve())))}"
    # As few execs as can be: each is a round trip through the engine (about a second with Docker Compose).
    await _run(env, f"rm -rf {home} && mkdir -p {home}/node_modules {BIN} {shlex.quote(str(Path(NODE).parent))}")
    if tree is not None:
        await asyncio.wait_for(env.upload_dir(tree, f"{home}/node_modules"), UPLOAD_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="hoh-env-shim-") as tmp:
        script = Path(tmp, exe)
        script.write_text(shim(adapter, command, facts.ca_bundle))
        programs.append((script, f"{BIN}/{exe}"))
        for source, target in programs:
            await asyncio.wait_for(env.upload_file(source, target), UPLOAD_TIMEOUT)
        on_path = script.read_bytes()
    await _verify(env, adapter, exe, pinned, [target for _source, target in programs])
    return {f"{BIN}/{exe}": on_path}


def shim(adapter: "HarnessAdapter", command: str, ca_bundle: str | None) -> str:
    """/opt/hoh/bin/EXECUTABLE: runs hoh's install; the image's CA bundle for Node, npm and OpenSSL unless the
    attempt set its own."""
    lines = ["#!/bin/sh", f"# hoh: {adapter.name} {adapter.capabilities.tested_version} "
                          f"({adapter.capabilities.npm_spec}), installed by hoh (hoh/envs/install.py)"]
    if ca_bundle:
        for name in ("NODE_EXTRA_CA_CERTS", "npm_config_cafile", "SSL_CERT_FILE"):
            lines.append(f': "${{{name}:={ca_bundle}}}"; export {name}')
    lines += NO_PROXY_GATEWAY
    lines.append(f'exec {command} "$@"')
    return "\n".join(lines) + "\n"


def _check(adapter: "HarnessAdapter", what: str, needs: ElfNeeds, facts: ImageFacts) -> None:
    if facts.libc == "unknown" and needs.libc != "static":
        raise EnvironmentUnavailable(f"{adapter.name}: the environment's image has no C library hoh recognizes "
                                     f"(neither glibc nor musl); {what} needs {needs.libc}")
    problem = needs.problem(facts.machine, facts.libc, facts.glibc)
    if problem:
        raise EnvironmentUnavailable(f"{adapter.name}: the environment's image ({facts.describe()}) cannot run "
                                     f"{what}: {problem}; use a glibc-based image of {needs.machine} (Debian, "
                                     "Ubuntu), or one with the CLI installed at "
                                     f"{adapter.capabilities.tested_version}")


async def _node_for(adapter: "HarnessAdapter", facts: ImageFacts, programs: list[tuple[Path, str]]) -> str:
    """The image's Node when it is new enough, else hoh's own (checked against the image, then added to
    `programs`); a Node that still does not start there is the verify's one line (the loader's own words)."""
    if facts.node and facts.node_version and facts.node_version >= node.MIN_NODE:
        return facts.node
    runtime = await asyncio.to_thread(node.node_runtime, facts.machine)
    had = "no node" if not facts.node_version else "Node " + ".".join(map(str, facts.node_version))
    _check(adapter, f"the Node runtime hoh supplies (the image has {had})", read_needs(runtime), facts)
    programs.append((runtime, NODE))
    return NODE


async def _verify(env: "BaseEnvironment", adapter: "HarnessAdapter", exe: str, pinned: tuple[int, int, int] | None,
                  programs: list[str]) -> None:
    """The uploads made executable, then the CLI must report the pinned version from its shim."""
    modes = " ".join(shlex.quote(p) for p in programs)
    code, output = await _run(env, away_from_home(f"chmod 755 {modes} && PATH={BIN}:{IMAGE_PATH} {shlex.quote(exe)} "
                                                  "--version 2>&1"))
    version = node.parse_version(output)
    if code != 0 or (pinned is not None and version != pinned):
        why = _last_line(output) if code != 0 else f"it reports {output.strip()[:80]!r}"
        raise EnvironmentUnavailable(f"{adapter.name}: the {adapter.capabilities.npm_spec} hoh installed does not "
                                     f"run in the environment ({why})")


async def gateway_of(env: "BaseEnvironment") -> str | None:
    """The environment's default gateway, read from the kernel's routing table (no `ip` needed): on Docker and
    Podman, this machine as the container reaches it."""
    code, table = await _run(env, "cat /proc/net/route")
    for line in table.splitlines()[1:] if code == 0 else []:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000" and fields[2] != "00000000":
            raw = bytes.fromhex(fields[2])
            return ".".join(str(b) for b in reversed(raw))
    return None


def stage_programs(programs: Programs, staging: Path) -> list[str]:
    """hoh's programs, staged with an attempt's view; returns the paths to put them at (the whole of `BIN`: a
    program an attempt added there is gone)."""
    (staging / BIN.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path, content in programs.items():
        staged = staging / path.lstrip("/")
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(content)
        staged.chmod(0o755)
    return [BIN, *sorted(p for p in programs if not p.startswith(f"{BIN}/"))]
