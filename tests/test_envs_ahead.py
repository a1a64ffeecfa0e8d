"""The roles' environments between their turns (hoh/envs/idle.py), without an engine: which environment is
readied and which paused at each role's turn, that nothing is paused under an attempt, and that a start made
ahead that failed is said at the role's own start. The real pause, in Docker and Podman, is in the kill -9
tests of test_envs.py and test_envs_podman.py; the readying ahead in the demo's journal (test_envs.py). And which
leftovers of a killed `hoh replay` the next one stops (in Docker: test_envs.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hoh.envs.harbor_env import EnvironmentSpec
from hoh.envs.idle import Ahead, Idle, following
from hoh.envs.role import RoleEnvironment
from hoh.errors import EnvironmentUnavailable


class Seen:
    """A role's environment as `Ahead` drives it: what it was told, in order, across threads."""

    def __init__(self, role: str, said: list[str], told: threading.Condition):
        self.role, self.said, self.told = role, said, told

    def _say(self, what: str) -> None:
        with self.told:
            self.said.append(f"{what} {self.role}")
            self.told.notify_all()

    def ready_ahead(self) -> None:
        self._say("ready")

    def pause(self) -> None:
        self._say("pause")


def roles(*names: str) -> tuple[list[str], threading.Condition, dict[str, Seen]]:
    said: list[str] = []
    told = threading.Condition()
    return said, told, {role: Seen(role, said, told) for role in names}


def said_at_least(said: list[str], told: threading.Condition, count: int) -> list[str]:
    with told:
        assert told.wait_for(lambda: len(said) >= count, timeout=60), said
        return list(said)


def test_each_turn_readies_the_next_role_and_pauses_the_last_one():
    assert following("planner", ("planner", "developer", "qa")) == ("qa", "developer")
    assert following("developer", ("planner", "developer", "qa")) == ("planner", "qa")
    assert following("qa", ("qa", "planner", "developer")) == ("developer", "planner")
    assert following("developer", ("developer",)) == (None, None)
    said, told, envs = roles("planner", "developer", "qa")
    ahead = Ahead(envs.get, tuple(envs), pause_after=0.0)
    for role, count in (("planner", 2), ("developer", 4), ("qa", 6)):
        ahead.turn_of(role)
        said_at_least(said, told, count)  # this turn's work done before the next turn
    assert sorted(said[0:2]) == ["pause qa", "ready developer"]
    assert sorted(said[2:4]) == ["pause planner", "ready qa"]
    assert sorted(said[4:6]) == ["pause developer", "ready planner"]
    ahead.close()
    ahead.turn_of("planner")  # closed: nothing more is started aside
    assert len(said) == 6


def test_a_role_whose_turn_comes_before_its_pause_is_due_is_never_paused():
    said, told, envs = roles("planner", "developer", "qa")
    ahead = Ahead(envs.get, tuple(envs), pause_after=3600.0)
    ahead.turn_of("developer")  # the planner's pause is due in an hour
    ahead.turn_of("qa")  # the planner is readied: its pause is cancelled
    said_at_least(said, told, 2)
    ahead.close()  # the developer's pause, still due, is cancelled with the session
    assert sorted(said) == ["ready planner", "ready qa"]


def test_a_two_role_run_never_pauses_the_role_it_readies():
    said, told, envs = roles("planner", "developer")
    ahead = Ahead(envs.get, tuple(envs), pause_after=3600.0)
    ahead.turn_of("planner")
    said_at_least(said, told, 1)
    assert not ahead._pauses, "no pause is due for the role just readied"
    ahead.close()
    assert said == ["ready developer"]


def test_an_environment_in_use_is_never_paused():
    idle, lock = Idle(), threading.Lock()
    assert idle.may_pause()
    with idle.in_use(lock):
        with idle.in_use(lock):
            assert not idle.may_pause()
        assert not idle.may_pause()
    assert idle.may_pause()
    idle.can = False  # its engine failed once: not asked again
    assert not idle.may_pause()


class FailsToStart(RoleEnvironment):
    def __init__(self, tmp: Path):
        spec = EnvironmentSpec(name="docker", role="developer", session_id="hoh-developer-x", dir=tmp, image=None,
                               dockerfile=None, network=False)
        super().__init__(spec, loop=None, adapter=None, bounds=(), on_start=lambda spec: None)  # type: ignore[arg-type]
        self.tries = 0

    def _start(self) -> None:
        self.tries += 1
        raise EnvironmentUnavailable("--env docker: the developer environment did not start: no image")


def test_a_start_made_ahead_that_failed_is_said_at_the_role_s_own_start(tmp_path):
    env = FailsToStart(tmp_path)
    env.ready_ahead()  # in Ahead's thread: nothing raised there
    assert env.tries == 1
    with pytest.raises(EnvironmentUnavailable, match="did not start: no image"):
        env.start()
    assert env.tries == 1, "the failure made ahead is the role's, not a second start"
    env.pause()  # never started: nothing to pause, nothing asked
    assert not env.idle.paused


def test_only_this_user_s_own_killed_replays_are_stopped(tmp_path, monkeypatch):
    """`hoh replay`'s leftovers are found in the temporary directory, where anyone may write: a record in a
    directory others can read, one naming a project that is not a replay's, and one whose replay still runs
    make hoh stop nothing."""
    import json
    import os

    from hoh.envs import pool
    from hoh.harness.process import start_ticks
    made: list[str] = []
    monkeypatch.setattr(pool.EnvironmentSpec, "make", lambda spec, socket_dir=None: made.append(spec.session_id))

    def scratch(name: str, mode: int, **record) -> Path:
        where = tmp_path / f"{pool.REPLAY_SCRATCH}{name}"
        where.mkdir(mode=mode)
        where.chmod(mode)
        (where / pool.OWNER).write_text(json.dumps({"pid": 1, "ticks": 0, "environment": "docker",
                                                    "session_id": "hoh-replay-0123456789", **record}))
        return where

    scratch("open", 0o755)
    scratch("victim", 0o700, session_id="someone-elses-project")
    scratch("live", 0o700, pid=os.getpid(), ticks=start_ticks(os.getpid()))
    scratch("unknown", 0o700, ticks=None)
    pool.stop_abandoned(tmp_path, adapter=None)  # type: ignore[arg-type]
    assert made == []
    scratch("killed", 0o700)  # pid 1 never started at tick 0: its replay is gone
    pool.stop_abandoned(tmp_path, adapter=None)  # type: ignore[arg-type]
    assert made == ["hoh-replay-0123456789"]
