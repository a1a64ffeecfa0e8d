"""`--env` through its one registry, and the seam between an adapter and the place its CLI runs in."""

from __future__ import annotations

import inspect

import pytest

from hoh.config import HohConfig, apply_overrides
from hoh.envs import enforced, registry
from hoh.envs.attempt import run_attempt
from hoh.envs.base import Executor
from hoh.envs.harbor_env import one_line
from hoh.errors import EnvironmentUnavailable
from hoh.harness.base import HarnessAdapter
from hoh.paths import WorkspacePaths
from hoh.runtime.setup import role_adapters
from hoh.store.journal import Journal


def _scripted(**flags: str) -> HohConfig:
    return apply_overrides(HohConfig(), [], {"harness.name": "scripted", **flags})


def test_local_is_this_machine_s_jail_for_every_role_and_nothing_is_started(tmp_path):
    config = _scripted()
    journal = Journal(tmp_path / "journal.jsonl")
    places = registry.places(config, WorkspacePaths(tmp_path), journal, role_adapters(config))
    try:
        places.check()
        assert {role: place for role, place in places.executors().items()} == {
            role: registry.LOCAL for role in ("planner", "developer", "qa")}
    finally:
        places.close()
    assert not journal.path.exists()  # nothing started, nothing to stop after a crash
    def no_harness():
        raise AssertionError("a local replay made QA's adapter")

    place = registry.replay_place(config, registry.LOCAL_NAME, tmp_path, tmp_path / "scratch", no_harness,
                                  warn=lambda message: None)
    assert place is registry.LOCAL and registry.stop_replay_place(place) is None


def test_a_name_no_registry_knows_is_one_line_saying_what_to_do():
    with pytest.raises(EnvironmentUnavailable) as raised:
        registry.check(_scripted(**{"environment.name": "nosuch"}))
    message = str(raised.value)
    assert message.startswith("--env nosuch") and "\n" not in message
    # With Harbor (the CI's env tier asks through `hoh build` too): the names to use; without it, how to get it.
    assert ("no such environment; use local or one of Harbor's" in message) != ("pip install 'hoh[harbor]'" in message)


def test_an_adapter_never_sees_where_it_runs():
    # The one attempt pipeline takes the executor; no method of the adapter contract does.
    assert "executor" in inspect.signature(run_attempt).parameters
    for name, member in inspect.getmembers(HarnessAdapter, inspect.isfunction):
        hints = " ".join(str(p.annotation) for p in inspect.signature(member).parameters.values())
        assert "Executor" not in hints and "executor" not in inspect.signature(member).parameters, name
    for method in ("placed", "execute", "execute_many", "prepare"):
        doc = inspect.getdoc(getattr(Executor, method)) or ""
        assert "Raises:" in doc, f"Executor.{method} does not say what it raises"


def test_a_compose_failure_reads_as_its_cause_not_as_the_command_harbor_ran():
    """Harbor's compose errors spell out the whole command line first (two compose files in a venv's path: more
    than the one line holds); the user reads the engine's words instead."""
    command = "docker compose --project-name hoh-planner-1 --project-directory /w/env " + " ".join(
        f"-f /a/long/venv/path/lib/python3.12/site-packages/harbor/compose-{n}.yaml" for n in range(6))
    err = RuntimeError(f"Docker compose command failed for environment hoh. Command: {command} up --detach --wait. "
                       "Return code: 125. Stdout: unknown flag: --project-name\nSee 'docker --help'.. Stderr: None. ")
    line = one_line(err)
    assert "Return code: 125" in line and "unknown flag: --project-name" in line
    assert "--project-directory" not in line and "\n" not in line


@pytest.mark.parametrize("seen, missing", [
    ("processes 512\nmemory_mb 1073741824\n", []),  # cgroup v1 or v2, both applied
    ("processes 256\nmemory_mb 536870912\n", []),  # tighter than asked: applied
    ("processes max\nmemory_mb max\n", ["sandbox.limits.processes=512", "sandbox.limits.memory_mb=1024"]),
    ("memory_mb 9223372036854771712\n", ["sandbox.limits.processes=512", "sandbox.limits.memory_mb=1024"]),
    ("", ["sandbox.limits.processes=512", "sandbox.limits.memory_mb=1024"]),  # rootless on v1: no cgroup at all
    ("processes 512\nmemory_mb 2147483648\n", ["sandbox.limits.memory_mb=1024"]),
])
def test_a_limit_the_engine_took_but_does_not_apply_is_named(seen, missing):
    assert enforced.unenforced(seen, 512, 1024) == missing


def test_the_line_names_each_limit_missing_once():
    assert enforced.warning("podman", ["sandbox.limits.processes=512"]).endswith("the roles run without it")
    both = enforced.warning("podman", ["sandbox.limits.processes=512", "sandbox.limits.memory_mb=1024"])
    assert "sandbox.limits.processes=512 and sandbox.limits.memory_mb=1024" in both and both.endswith("without them")


def test_no_limit_asked_is_none_missing():
    assert enforced.unenforced("", None, None) == []
    assert enforced.unenforced("processes max\n", None, 64) == ["sandbox.limits.memory_mb=64"]
