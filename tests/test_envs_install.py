"""hoh installs the harness CLI into each role's environment at the pinned version (hoh/envs/install.py):
real CLIs (OpenCode, one native binary; Pi, a Node CLI in an image with no Node) build the demo with
`--env docker` in localhost/hoh-base:bookworm against hoh's mock model on this machine's loopback (reached
through hoh's egress proxy on the container's gateway) and reach the same candidate ids as the same build
run locally; a CLI that cannot be installed ends the build in one line with its cause, exit 2, and leaves
no workspace. Needs Harbor, Docker and the pinned CLIs (see harbor_env.py and conftest's harness_bin)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import DEMO
from harbor_env import BASE_IMAGE, harbor, journal  # noqa: F401 - harbor is a fixture

from hoh import api
from hoh.config import HohConfig
from hoh.envs.elf import read_needs
from hoh.envs.install import ImageFacts, shim
from hoh.envs.node import npm_cause
from hoh.harness import registry
from hoh.testing.demo_mock import mock_script
from hoh.testing.mock_llm import MockLLM

MODEL = {"opencode": "mock-model", "pi": "mock-model", "codex": "gpt-5.5"}
SENTINEL = "sk-hoh-sentinel-e9v1"
ENV = ("--env", "docker", "--env-image", BASE_IMAGE)
LOOPS = {"codex": 1}
"""Codex's install is the largest (its native package, ~420 MB, and hoh's Node into each role's container):
one loop shows it, and keeps the test within a few minutes."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The scripted demo over two loops, and the mock script that replays it through a real CLI."""
    ws = tmp_path_factory.mktemp("reference") / "ws"
    assert api.build(DEMO / "spec.md", ws, HohConfig(loops=2, harness={"name": "scripted"})).status == "finished"
    return ws, mock_script(yaml.safe_load((DEMO / "script.yaml").read_text()), ws)


def candidate_ids(ws: Path) -> list[str]:
    return [loop["candidate_id"] for loop in api.status(ws)["loops"]]


def containers(under: Path) -> list[str]:
    """The containers (running or not) of the environments hoh made for workspaces under `under` (the engine
    may be shared with other runs)."""
    out = subprocess.run(["docker", "ps", "-a", "--format", '{{.ID}} {{.Label "com.docker.compose.project.working_dir"}}'],
                         capture_output=True, text=True, timeout=60).stdout
    return [line for line in out.splitlines() if f" {under}/" in line]


def build(harbor, name: str, mock: MockLLM, ws: Path, *extra: str, env: dict[str, str] | None = None,
          loops: int | None = None):
    return harbor.hoh("build", DEMO / "spec.md", "--harness", name, "--model", MODEL[name], "--base-url",
                      mock.base_url, "--api-key-env", "HOH_TEST_KEY", "--loops", loops or LOOPS.get(name, 2), "-w", ws,
                      "-q",
                      *extra,
                      timeout=600, env={"HOH_TEST_KEY": SENTINEL, **(env or {})})


@pytest.mark.parametrize("name", ["opencode", "pi", "codex"])
def test_a_real_cli_installed_by_hoh_builds_in_docker_as_it_does_locally(name, harbor, harness_bin, reference,
                                                                         tmp_path):
    ref_ws, script = reference
    with MockLLM(script=script) as mock:  # on 127.0.0.1: the container reaches it only through hoh's proxy
        local = build(harbor, name, mock, tmp_path / "local",
                      env={"PATH": f"{harness_bin}{os.pathsep}{os.environ['PATH']}"})
        assert local.returncode == 0, local.stderr[-3000:]
        # In the environment the CLI is hoh's install, not this machine's: its CLIs are not on PATH.
        inside = build(harbor, name, mock, tmp_path / "env", *ENV)
        requests = mock.requests()
    assert inside.returncode == 0, inside.stderr[-3000:]
    loops = LOOPS.get(name, 2)
    assert len(candidate_ids(tmp_path / "env")) == loops
    assert candidate_ids(tmp_path / "env") == candidate_ids(tmp_path / "local") == candidate_ids(ref_ws)[:loops]
    assert "each environment is its role's sandbox" in inside.stderr + inside.stdout
    dev = tmp_path / "env" / "state" / "loops" / "0001" / "roles" / "developer" / "attempt-1"
    command = json.loads((dev / "command.json").read_text())
    assert command["environment"] == "docker" and command["argv"][0] == registry.adapter_class(name).capabilities.executable
    assert json.loads((dev / "result.json").read_text())["harness"]["tool_calls"] >= 1
    if name == "codex":  # its bubblewrap cannot work in a container: the container is the sandbox
        assert command["argv"][command["argv"].index("-s") + 1] == "danger-full-access"
    # The key stayed on this machine: the proxy sent it, the container only ever held an attempt's token.
    sent = {v for r in requests for k, v in r["headers"].items() if k == "authorization"}
    assert sent == {f"<redacted len={len('Bearer ' + SENTINEL)}>"}
    assert containers(tmp_path) == []  # every environment stopped and deleted
    # hoh's install and its --version check leave nothing the checks between attempts take for a role's
    # tampering: one environment per role, none replaced (a CLI writing under the image's HOME once made it 23).
    events = journal(tmp_path / "env")
    assert len([e for e in events if e["event"] == "environment_started"]) == 3
    # What a CLI writes into the project's .git of a read-only view (OpenCode: .git/opencode) is the view put right
    # before the next attempt, never a replaced environment.
    changed = [c for e in events if e["event"] == "environment_tampered" for c in e["changes"]]
    assert all(c.split(" ", 1)[1].startswith(f"{tmp_path / 'env' / 'project'}/") for c in changed), changed


def test_a_cli_that_cannot_be_installed_is_one_line_exit_2_and_no_workspace(harbor, tmp_path):
    """This machine's npm cannot reach a registry (and has an empty cache): the cause npm gives is the line,
    not its pointer to a log file."""
    ws = tmp_path / "ws"
    offline = {"npm_config_registry": "http://127.0.0.1:9/", "npm_config_cache": str(tmp_path / "npm-cache"),
               "npm_config_fetch_retries": "0", "XDG_CACHE_HOME": str(tmp_path / "cache")}  # not hoh's CLI cache
    with MockLLM() as mock:
        result = build(harbor, "pi", mock, ws, *ENV, env=offline)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1, lines
    assert "cannot install @mariozechner/pi-coding-agent@0.73.1 for the environment: npm failed on this machine" \
        in lines[0]
    assert "ECONNREFUSED" in lines[0] and "complete log" not in lines[0]
    assert not ws.exists()
    assert containers(tmp_path) == []


def test_npm_s_cause_is_kept_and_its_log_pointer_dropped():
    output = ("npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN\n"
              "npm error request to https://registry.npmjs.org/x failed, reason: self-signed certificate in "
              "certificate chain\nnpm error     at ClientRequest.<anonymous> (/usr/lib/node_modules/npm/x.js:1:2)\n"
              "npm error A complete log of this run can be found in: /root/.npm/_logs/1.log\n")
    assert npm_cause(output) == ("SELF_SIGNED_CERT_IN_CHAIN; request to https://registry.npmjs.org/x failed, "
                                 "reason: self-signed certificate in certificate chain")


def test_what_an_image_offers_is_read_as_text_and_checked_against_the_program(tmp_path):
    bookworm = ImageFacts.parse("machine=x86_64\nlibc=glibc 2.36\nca=/etc/ssl/certs/ca-certificates.crt\n")
    alpine = ImageFacts.parse("machine=x86_64\nlibc=musl\nnode=/usr/bin/node\nnode_version=v18.19.0\n")
    assert (bookworm.glibc, bookworm.node, alpine.libc, alpine.node_version) == ((2, 36), None, "musl", (18, 19, 0))
    python = read_needs(Path(os.path.realpath("/usr/bin/python3")))
    assert python.libc == "glibc" and python.problem("x86_64", "glibc", (2, 36)) is None
    assert python.problem("x86_64", "musl", None) == "it needs glibc and the image's C library is musl"
    assert "image is aarch64" in python.problem("aarch64", "glibc", (2, 36))
    adapter = registry.create(HohConfig(harness={"name": "pi"}).harness)
    text = shim(adapter, "/opt/hoh/node/bin/node /opt/hoh/cli/pi-0.73.1/cli.js", bookworm.ca_bundle)
    assert text.startswith("#!/bin/sh\n") and text.endswith('exec /opt/hoh/node/bin/node /opt/hoh/cli/pi-0.73.1/cli.js "$@"\n')
    assert ': "${NODE_EXTRA_CA_CERTS:=/etc/ssl/certs/ca-certificates.crt}"; export NODE_EXTRA_CA_CERTS' in text


def test_an_image_without_python3_runs_the_roles_on_a_bridge_network_and_says_so_once(harbor, harness_bin,
                                                                                    reference, tmp_path):
    """hoh's forwarder to its proxy needs the image's python3: without one the containers cannot be closed, so
    they get a bridge network with the proxy on its gateway, the run says so in one line, and builds the same."""
    ref_ws, script = reference
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {BASE_IMAGE}\nRUN rm -f /usr/bin/python3* /usr/local/bin/python3*\n")
    with MockLLM(script=script) as mock:
        built = build(harbor, "opencode", mock, tmp_path / "ws", "--env", "docker", "--env-dockerfile", dockerfile,
                      loops=1)
    assert built.returncode == 0, built.stderr[-3000:]
    said = [line for line in built.stderr.splitlines() if "no python3 to run hoh's forwarder" in line]
    assert len(said) == 1, built.stderr
    assert candidate_ids(tmp_path / "ws") == candidate_ids(ref_ws)[:1]
    assert containers(tmp_path) == []
