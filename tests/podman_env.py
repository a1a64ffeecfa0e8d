"""Podman, podman-compose and the base image for the Podman tests, and Harbor's venv to drive them.

`--env podman` is Harbor's own PodmanEnvironment: it runs `podman-compose` (1.x; podman 4.3 has no
`podman compose`) from PATH and `podman` itself, both against the machine's store, where the examples' base
image must be (`.ci/podman-engine start` and `base-image` make all of it). Missing any of it, or Harbor's
venv, skips these tests, unless `HOH_REQUIRE_HARBOR=1` (CI), where it fails them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
from harbor_env import BASE_IMAGE, Harbor, find_harbor

SETUP = "see .ci/podman-engine (start, then base-image)"


def podman_env() -> dict[str, str]:
    """This environment without DOCKER_CONFIG: podman 4.3 reads credentials from $DOCKER_CONFIG/config.json
    when it is set and fails every `run` when that file is missing (.ci/docker-engine's holds only Compose)."""
    return {k: v for k, v in os.environ.items() if k != "DOCKER_CONFIG"}


def podman(*args: Any, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=podman_env(), stdin=subprocess.DEVNULL, check=check)


def podman_problem() -> str | None:
    for program in ("podman", "podman-compose"):
        if shutil.which(program) is None:
            return f"no {program} on PATH; {SETUP}"
    if podman("image", "exists", BASE_IMAGE).returncode != 0:
        return f"no {BASE_IMAGE} in podman's store; {SETUP}"
    # The settings this machine needs (runc, cgroupfs, rlimits it allows): without them no container starts.
    ran = podman("run", "--rm", "--network", "none", BASE_IMAGE, "true")
    if ran.returncode != 0:
        return f"a container of {BASE_IMAGE} does not start ({(ran.stderr.strip().splitlines() or ['?'])[-1]}); {SETUP}"
    return None


def containers() -> list[dict[str, Any]]:
    """Every container in podman's store, running or not: name, image, labels."""
    listed = podman("ps", "-a", "--format", "json", check=True)
    return [{"name": (c.get("Names") or ["?"])[0], "image": c.get("Image", ""), "labels": c.get("Labels") or {},
             "state": c.get("State", "")} for c in json.loads(listed.stdout or "[]")]


def networks() -> list[str]:
    return podman("network", "ls", "--format", "{{.Name}}", check=True).stdout.split()


class PodmanHarbor(Harbor):
    """Harbor's venv, running hoh and Harbor with podman's environment."""

    def env(self) -> dict[str, str]:
        env = super().env()
        env.pop("DOCKER_CONFIG", None)
        return env


@pytest.fixture(scope="session")
def podman_harbor(tmp_path_factory) -> PodmanHarbor:
    exe = find_harbor()
    problem = "no harbor CLI: python3.12 -m venv .venv-harbor && .venv-harbor/bin/pip install -e '.[harbor]'" \
        if exe is None else podman_problem()
    if problem:
        if os.environ.get("HOH_REQUIRE_HARBOR"):
            pytest.fail(f"Harbor and Podman are required (HOH_REQUIRE_HARBOR) but: {problem}")
        pytest.skip(problem)
    return PodmanHarbor(exe, tmp_path_factory.mktemp("harbor-cache"))
