"""The host side of hoh's Harbor agent, without Docker: hoh's synchronous Runtime driving coroutines on a loop
someone else runs (Harbor's), stopped at once at a deadline; and one given environment for every role of a
session. Docker and Harbor: test_harbor_agent.py."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from hoh.config import HohConfig
from hoh.envs.harbor_env import EventLoop
from hoh.envs.local.executor import LOCAL
from hoh.envs.pool import Environments, Given
from hoh.harness.registry import create
from hoh.paths import WorkspacePaths


class Foreign:
    """A running asyncio loop in a thread of its own, as Harbor's is to hoh's Runtime thread."""

    def __enter__(self) -> asyncio.AbstractEventLoop:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self.loop

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        assert self.loop.is_running() is False
        self.loop.close()


def test_a_loop_someone_else_runs_is_used_and_never_stopped():
    with Foreign() as loop:
        events = EventLoop(loop)
        assert not events.owned

        async def where() -> bool:
            return asyncio.get_running_loop() is loop
        assert events.run(where()) is True
        with pytest.raises(TimeoutError, match="did not answer within 0.2s"):
            events.run(asyncio.sleep(5), timeout=0.2)
        events.close()  # not ours: it goes on running
        assert events.run(where()) is True and loop.is_running()


def test_a_coroutine_s_own_timeout_is_its_error_not_the_wait_s():
    """A timeout inside the coroutine (an `exec` past its own limit) comes out as itself, with or without a wait
    limit of the caller's (a TimeoutError is what both raise)."""
    async def slow_exec() -> None:
        await asyncio.wait_for(asyncio.sleep(5), 0.05)

    with Foreign() as loop:
        events = EventLoop(loop)
        for wait in (None, 30):
            with pytest.raises(TimeoutError) as raised:
                events.run(slow_exec(), timeout=wait)
            assert "did not answer" not in str(raised.value)


def test_interrupt_cancels_what_runs_and_its_cleanup_ends_before_run_returns():
    """The deadline's stop at once: the coroutine in flight (a supervised attempt) is cancelled, its own
    cleanup (killing the CLI) runs to its end first, then the Runtime's thread gets KeyboardInterrupt; every
    later call too, without starting its coroutine."""
    with Foreign() as loop:
        events = EventLoop(loop)
        cleaned, started = threading.Event(), threading.Event()

        async def attempt() -> None:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)  # the kill takes a moment
                cleaned.set()
                raise
        outcome: list[BaseException] = []

        def runtime() -> None:
            try:
                events.run(attempt())
            except BaseException as err:  # noqa: BLE001 - what the Runtime's thread gets
                outcome.append(err)
                outcome.append(cleaned.is_set())
        thread = threading.Thread(target=runtime)
        thread.start()
        assert started.wait(5)
        begun = time.monotonic()
        events.interrupt()
        thread.join(10)
        assert isinstance(outcome[0], KeyboardInterrupt) and outcome[1] is True
        assert time.monotonic() - begun < 5

        ran = []

        async def later() -> None:
            ran.append(1)
        with pytest.raises(KeyboardInterrupt):
            events.run(later())
        assert ran == []


def test_a_given_environment_serves_every_role_and_is_never_started_or_stopped_by_hoh(tmp_path):
    config = HohConfig().model_copy(update={"environment": HohConfig().environment.model_copy(
        update={"name": "docker"})})
    adapters = {role: create(config.harness.model_copy(update={"name": "scripted"}))
                for role in ("planner", "developer", "qa")}
    paths = WorkspacePaths(tmp_path / "ws")
    journal = []

    class Journal:
        def append(self, event) -> None:
            journal.append(event)

    env = object()
    with Foreign() as loop:
        events = EventLoop(loop)
        pool = Environments(config, paths, Journal(), adapters, given=Given(env, events))  # type: ignore[arg-type]
        pool.check()  # no preflight: the environment runs already
        executors = pool.executors()
        assert {e.env for e in executors.values()} == {env} and not any(e.owned for e in executors.values())
        assert pool.loop is events
        pool.close()
        assert journal == [] and loop.is_running()
    # without one given, the same settings make hoh's own environments; local ones are no environments at all
    assert Environments(config, paths, Journal(), adapters).given is None  # type: ignore[arg-type]
    assert Environments(HohConfig(), paths, Journal(), adapters).executor("qa") is LOCAL  # type: ignore[arg-type]


def test_two_runtimes_in_one_process_keep_their_own_writes_apart(tmp_path):
    """The guard between roles explains changes by hoh's own writes; a Runtime of another trial in the same
    process (Harbor runs trials concurrently) must neither add to nor clear this one's record."""
    import contextvars

    from hoh.fsutil import note_written, own_writes, take_written
    seen: dict[str, set[str]] = {}
    barrier = threading.Barrier(2)

    def runtime(name: str) -> None:
        own_writes()
        note_written(tmp_path / name)
        barrier.wait()
        seen[name] = take_written()
        barrier.wait()
        seen[name + " after"] = take_written()

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(runtime, n)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert seen == {"a": {str(tmp_path / "a")}, "b": {str(tmp_path / "b")}, "a after": set(), "b after": set()}
