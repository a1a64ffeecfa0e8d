"""`--env` through its one registry, and the seam between an adapter and the place its CLI runs in."""

from __future__ import annotations

import inspect

import pytest

from hoh.config import HohConfig, apply_overrides
from hoh.envs import registry
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
