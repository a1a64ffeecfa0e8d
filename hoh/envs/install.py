"""What hoh puts into a role's environment when it starts: the supervisor and the harness's program.

The scripted harness needs only a `python3` there: hoh copies in the scripted agent and the pure-Python
part of PyYAML as a plain site dir (`SITE`), nothing installed by hand. A CLI harness must find its
executable on the environment's PATH (hoh's own `/opt/hoh/bin` first); without it the start ends in one line
that says which program is missing.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..errors import EnvironmentUnavailable
from ..harness.attempt import HOH_PACKAGE
from .supervise import ROOT, SUPERVISOR, SUPERVISOR_PATH

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.base import HarnessAdapter

SITE = f"{ROOT}/site"
SCRIPTED_AGENT = ("__init__.py", "testing/__init__.py", "testing/scripted_agent.py")
"""The part of hoh's package the scripted agent runs from (it imports nothing else of hoh)."""


def scripted_site(into: Path) -> None:
    """hoh's scripted agent and PyYAML's Python modules (no compiled extension: any Python 3 runs them)."""
    for rel in SCRIPTED_AGENT:
        dest = into / "hoh" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HOH_PACKAGE / rel, dest)
    shutil.copytree(Path(yaml.__file__).parent, into / "yaml", ignore=shutil.ignore_patterns("*.so", "__pycache__"))


async def _run(env: "BaseEnvironment", command: str, timeout: int = 120) -> tuple[int, str]:
    result = await env.exec(command, timeout_sec=timeout)
    return result.return_code, ((result.stdout or "") + (result.stderr or "")).strip()


async def install_harness(env: "BaseEnvironment", adapter: "HarnessAdapter") -> None:
    code, output = await _run(env, f"mkdir -p {ROOT}/bin {ROOT}/attempts && command -v wc head kill date sleep")
    if code != 0:
        raise EnvironmentUnavailable(f"the environment's image lacks a POSIX shell with wc, head, kill, date and sleep ({output}); "
                                     "use an image that has them (every Debian, Ubuntu or Alpine image does)")
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
            return
    code, _ = await _run(env, f"PATH={ROOT}/bin:$PATH command -v {shlex.quote(adapter.command)}")
    if code != 0:
        raise EnvironmentUnavailable(f"{adapter.name}: '{adapter.command}' is not installed in the environment's image; "
                                     f"add it to the image ({adapter.capabilities.install_hint})")


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
