"""The harness registry: a third party's adapter chosen as `package.module:Class` runs a loop through the
real CLI and again on resume; a bad path is one clear line; no harness given is an error naming the
choices; each adapter's capabilities are one frozen object, and the docs' CLI versions are its pins."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest
from conftest import REPO, Project, mini_script, run_hoh

from hoh.bench.runner import bench_settings
from hoh.config import HarnessConfig, HohConfig, apply_overrides
from hoh.errors import UsageError
from hoh.harness import registry
from hoh.harness.base import Capabilities, HarnessAdapter
from hoh.harness.pins import npm_specs, pinned_versions
from hoh.runtime.setup import role_adapters

THIRD_PARTY = REPO / "tests" / "data" / "thirdparty"
ACME = "acme_harness:AcmeAdapter"
LABELS = {"codex": "Codex CLI", "opencode": "OpenCode", "pi": "Pi", "claude": "Claude Code"}
"""How the docs name each CLI before its version."""


@pytest.fixture
def acme_importable(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(THIRD_PARTY))
    monkeypatch.syspath_prepend(str(THIRD_PARTY))


def one_line_usage_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    return result.stderr


def ran_with_acme(p: Project) -> list[int]:
    """The loops the journal saw finish, every attempt of the run by the third party's adapter."""
    journal = p.journal()
    assert {e["harness"] for e in journal if e["event"] == "run_started"} == {ACME}
    assert {e["harness"] for e in journal if e["event"] == "attempt_finished"} == {"acme"}
    return [e["loop"] for e in journal if e["event"] == "loop_finished"]


def test_a_third_party_adapter_runs_a_loop_and_resume_loads_it_again(tmp_path, acme_importable, monkeypatch):
    p = Project(tmp_path, mini_script(2))
    built = run_hoh("build", p.spec, "--harness", ACME, "--loops", "1", "-w", p.ws, "-q")
    assert built.returncode == 0, built.stderr
    assert "name: acme_harness:AcmeAdapter" in (p.ws / "hoh.yaml").read_text()  # what resume reads
    assert (p.ws / "script.yaml").is_file()  # the inherited frozen_inputs hook froze its script
    command = json.loads(p.state("loops", "0001", "roles", "developer", "attempt-1", "command.json").read_text())
    assert "ACME_ADAPTER" in command["env_names"]  # the third party's class built the attempt
    assert ran_with_acme(p) == [1]

    resumed = run_hoh("resume", "-w", p.ws, "--loops", "1", "-q")
    assert resumed.returncode == 0, resumed.stderr
    command = json.loads(p.state("loops", "0002", "roles", "developer", "attempt-1", "command.json").read_text())
    assert "ACME_ADAPTER" in command["env_names"] and ran_with_acme(p) == [1, 2]

    monkeypatch.delenv("PYTHONPATH")
    one_line_usage_error(run_hoh("resume", "-w", p.ws, "--loops", "1", "-q"),
                         "harness 'acme_harness:AcmeAdapter': cannot import module 'acme_harness'", "PYTHONPATH")


@pytest.mark.parametrize("harness, message", [
    ("no_such_module:Adapter", "harness 'no_such_module:Adapter': cannot import module 'no_such_module'"),
    ("acme_harness:Missing", "module 'acme_harness' has no class 'Missing'"),
    ("acme_harness:NotAnAdapter", "NotAnAdapter is not a harness adapter; it must subclass "
                                  "hoh.harness.base.HarnessAdapter"),
    ("acme_harness:", "module 'acme_harness' has no class ''"),
    ("nope", "unknown harness 'nope'; choose one of: claude, codex, opencode, pi, scripted, or a third party's"),
])
def test_a_bad_harness_path_is_one_line_naming_what_to_do(tmp_path, acme_importable, harness, message):
    p = Project(tmp_path, mini_script(1))
    one_line_usage_error(run_hoh("build", p.spec, "--harness", harness, "-w", p.ws), message)
    assert not p.ws.exists()


def test_no_harness_given_is_an_error_naming_the_choices(tmp_path):
    p = Project(tmp_path, mini_script(1))
    error = one_line_usage_error(run_hoh("build", p.spec, "-w", p.ws, harness=None), "no harness chosen",
                                 "--harness NAME", "harness.name")
    assert all(name in error for name in registry.names()) and "hoh doctor" in error
    config = tmp_path / "hoh.yaml"
    config.write_text("loops: 2\n")
    one_line_usage_error(run_hoh("build", p.spec, "--config", config, "-w", p.ws), "no harness chosen")
    config.write_text("harness: {name: scripted}\n")
    assert run_hoh("build", p.spec, "--config", config, "-w", p.ws, "-n", "1", "-q").returncode == 0
    with pytest.raises(UsageError, match="no harness chosen: pass --harness NAME.*--harness oracle"):
        bench_settings(str(tmp_path), loops=3)
    assert bench_settings(str(tmp_path), loops=3, hoh={"harness": {"name": "pi"}}).harness == "pi"


def test_a_role_may_run_a_third_party_adapter(acme_importable):
    config = apply_overrides(HohConfig(), [f"roles.qa.harness={ACME}"], {"harness.name": "scripted"})
    adapters = role_adapters(config)
    assert type(adapters["qa"]).__name__ == "AcmeAdapter" and adapters["planner"].name == "scripted"
    bad = apply_overrides(HohConfig(), ["roles.qa.harness=acme_harness:Missing"], {"harness.name": "scripted"})
    with pytest.raises(UsageError, match=r"^roles\.qa\.harness: harness 'acme_harness:Missing': module"):
        role_adapters(bad)


def test_every_adapter_declares_its_capabilities_in_one_frozen_object():
    for name in registry.names():
        cls = registry.adapter_class(name)
        assert issubclass(cls, HarnessAdapter) and isinstance(cls.capabilities, Capabilities)
        assert "capabilities" in vars(cls), f"{name} inherits its capabilities instead of declaring them"
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls.capabilities.resume = True  # type: ignore[misc]
    scripted = registry.create(HarnessConfig(name="scripted")).capabilities
    assert scripted.ships_with_hoh and not scripted.needs_model and scripted.install_hint == "reinstall hoh"
    claude = registry.adapter_class("claude").capabilities
    assert claude.install_hint == f"npm install -g @anthropic-ai/claude-code@{claude.tested_version}"


def test_the_adapters_pins_are_what_ci_installs_and_what_the_docs_name():
    printed = subprocess.run([sys.executable, "-m", "hoh.harness.pins"], capture_output=True, text=True, check=True)
    assert printed.stdout.split() == npm_specs() and len(npm_specs()) == len(LABELS)
    ci = (REPO / ".ci" / "run").read_text()
    assert "python -m hoh.harness.pins" in ci
    pins = pinned_versions()
    assert set(pins) == set(LABELS)
    docs = [REPO / "README.md", *sorted((REPO / "adapters").glob("*.md")),
            REPO / "tests" / "data" / "harness_streams" / "README.md"]
    found = 0
    for name, version in pins.items():
        package = registry.adapter_class(name).capabilities.npm_package
        patterns = [rf"{re.escape(package)}@(\d+\.\d+\.\d+)", rf"\b{LABELS[name]} (\d+\.\d+\.\d+)",
                    rf"\*\*{LABELS[name]} (\d+\.\d+\.\d+)\*\*"]
        for doc in docs:
            text = doc.read_text(encoding="utf-8")
            named = [m for pattern in patterns for m in re.findall(pattern, text)]
            if doc.name == f"{name}.md":
                named += re.findall(r"Tested version: \*\*(\d+\.\d+\.\d+)\*\*", text)
            assert all(v == version for v in named), f"{doc.relative_to(REPO)} names {name} {named}, pinned {version}"
            found += len(named)
    assert found >= 3 * len(pins)  # the docs do name them; the check is not vacuous
    for path in [*(REPO / ".ci").iterdir(), REPO / "hoh" / "testing" / "mock_llm" / "record.py"]:
        text = path.read_text(encoding="utf-8")
        assert not any(spec in text for spec in npm_specs()), f"{path.relative_to(REPO)} repeats a pin"
