"""`HohAgent`: hoh as a Harbor agent. hoh's Runtime runs here, in the Harbor process; every role attempt runs
in the trial's environment, on the task's project, under the task's agent timeout.

    harbor run -p TASK --agent hoh.harbor:HohAgent --env docker -m MODEL \\
        --ak harness=opencode --ak loops=3 [--ak base_url=URL --ak api_key_env=NAME]

`setup` makes the harness CLI runnable in the environment (hoh.envs.install); `run` takes the task's workdir
as A_0, builds on a copy of it here (the workspace, its journal and history never enter the environment),
runs each role there through hoh's role environments (`hoh.envs`: the role's view copied in, the CLI
supervised through `exec`, its writable paths copied back sanitized), keeps every finished loop's candidate
for grading, and leaves the last one in the workdir for Harbor's verifier.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from harbor.agents.agent_auth_resolution import ResolvedModelConnection
from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import NonZeroAgentExitCodeError
from harbor.agents.options import AgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field, field_validator

import hoh

from .. import api
from ..config import HohConfig, TimeoutsConfig, apply_overrides, load_config
from ..envs.harbor_env import EventLoop, one_line
from ..envs.install import install_harness
from ..envs.registry import Given
from ..envs.trial import TrialRole, environment_name, workdir_of
from ..errors import HohError, TaskEnvironmentError, UsageError
from ..fsutil import atomic_write_json, atomic_write_text, own_writes
from ..harness import keys, registry
from ..paths import AgentRunPaths
from ..runtime.setup import role_adapters
from ..statuses import LoopStatus, RunStatus
from ..store.journal import Journal, RunHistory
from ..store.stop import StopFile
from ..store.workspace import is_workspace, open_workspace
from ..terminal import terminal_text
from . import budget
from .context import fill_context
from .endpoint import check_reachable, host_base_url
from .loops import describe_loop, export_candidate, finished_loops, restore_project, ws_loop_status

SUMMARY_SCHEMA_VERSION = 2
SETTLE_SECONDS = 120.0
"""After the deadline or Harbor's cancel: how long the Runtime gets to stop its attempt and journal the end."""


class HohAgentOptions(AgentOptions):
    """`--ak` options of the hoh agent (`harbor agent schema hoh.harbor:HohAgent`)."""

    harness: str | None = Field(None, description="The harness CLI hoh drives: opencode, pi, codex, claude, scripted "
                                "or package.module:Class (default: the config's harness.name; one is required).")
    loops: int | None = Field(None, ge=1, description="Loops to run (default: the config's, else 3); the task's "
                              "agent timeout may end the run earlier.")
    api_key_env: str | None = Field(None, description="Name of the variable holding the endpoint's API key (from "
                                    "--ae or this machine; it stays in hoh's egress proxy, outside the environment).")
    config: str | None = Field(None, description="A hoh.yaml on this machine to start from.")
    overrides: list[str] = Field(default_factory=list,
                                 description='hoh settings as KEY=VALUE, e.g. ["mode=developer_only"].')
    script: str | None = Field(None, description="The scripted harness's script (harness.script); default: the "
                               "task's scripted/script.yaml.")
    mock_llm: str | None = Field(None, description="A hoh.testing.mock_llm script: serve it on this machine and point "
                                 "the harness at it (offline tests of real CLIs).")
    harness_bin: str | None = Field(None, description="A directory holding the harness CLI on this machine "
                                    "(default: PATH and $HOH_HARNESS_BIN).")

    @field_validator("overrides", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class HohAgent(BaseAgent):
    """Runs a whole HoH build (Planner → Developer → QA, loop after loop) as one Harbor agent run."""

    capabilities = AgentCapabilities(base_url=True)
    options_model = HohAgentOptions
    options: HohAgentOptions

    def __init__(self, *args: Any, base_url: str | None = None, model_api_key_name: str | None = None,
                 **kwargs: Any):
        # Harbor's --base-url and --api-key-name (and --ak base_url) become hoh settings: hoh
        # configures the harness's endpoint itself, so Harbor's connection machinery stays out.
        if model_api_key_name is not None:
            kwargs.setdefault("api_key_env", model_api_key_name)
        super().__init__(*args, **kwargs)
        if base_url is not None:
            self.options = self.options.model_copy(update={"base_url": base_url})
        self.hoh_config = self.compose_config(self.options, self.model_name)
        self._budget: float | None = None
        self._workdir: str | None = None
        self._summary: dict[str, Any] = {}
        self._bad_input = False

    @staticmethod
    def name() -> str:
        return "hoh"

    def version(self) -> str:
        return hoh.__version__

    @classmethod
    def resolve_model_connection_config(cls, model_name: str | None, resolve_env: Any, **options: Any
                                        ) -> ResolvedModelConnection:
        """hoh configures the harness's endpoint itself (harness.base_url, api_key_env): Harbor
        only records the URL it was given."""
        url = options.get("base_url")
        return ResolvedModelConnection(user_supplied_base_url=url, resolved_base_url=url, can_configure_base_url=True)

    resolve_model_connection_for_execution = resolve_model_connection_config

    # ---- options → hoh.yaml ------------------------------------------------------------------
    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None, env: Any = None) -> None:
        """Bad options fail once, before Harbor starts any environment."""
        options = cls.parse_options(kwargs, env)
        cls.compose_config(options, (kwargs or {}).get("model_name"))

    @staticmethod
    def compose_config(options: HohAgentOptions | None, model: str | None) -> HohConfig:
        """hoh.yaml for the run: the config file (or hoh's defaults), then the options, then `overrides`."""
        options = options or HohAgentOptions()
        try:
            base = load_config(Path(options.config).expanduser()) if options.config else HohConfig()
            flags = {"harness.name": options.harness, "harness.model": model, "harness.base_url": options.base_url,
                     "harness.api_key_env": options.api_key_env, "harness.script": options.script,
                     "loops": options.loops}
            config = apply_overrides(base, options.overrides, flags)
            if not config.harness.name:
                raise UsageError(f"no harness chosen: pass --ak harness=NAME (one of: {registry.choices()}) or a "
                                 "--ak config=hoh.yaml that sets harness.name")
            registry.check_name(config.harness.name)
            return config
        except UsageError as err:
            raise ValueError(f"hoh agent: {err}") from None

    @property
    def paths(self) -> AgentRunPaths:
        return AgentRunPaths.for_trial(self.logs_dir.parent)

    # ---- setup -------------------------------------------------------------------------------
    async def setup(self, environment: BaseEnvironment) -> None:
        task = budget.task_of(environment)
        if task.has_steps:
            raise TaskEnvironmentError("multi-step tasks ([[steps]]) are not supported by the hoh agent: hoh builds "
                                       "from one spec, and grading one step's loops would need the earlier steps "
                                       "replayed first; run the steps as separate tasks")
        self._budget = budget.agent_timeout(environment, task)
        self.check_budget()
        self.use_harness_bin()
        self.hoh_config = self.with_frozen_inputs(self.hoh_config, Path(task.task_dir))
        self._workdir = await workdir_of(environment)
        try:
            adapters = role_adapters(self.hoh_config)
            for adapter in {(a.name, a.command): a for a in adapters.values()}.values():
                adapter.check_available()  # on this machine: hoh reads its version and builds its argv here
                await install_harness(environment, adapter)
        except HohError as err:
            raise TaskEnvironmentError(one_line(err)) from None

    def check_budget(self) -> None:
        """A role timeout the user set that the task's whole budget cannot hold is refused up front;
        otherwise the run finds out (and says so) when the budget ends before the first role."""
        wall = self.hoh_config.timeouts.wall_seconds
        explicit = wall != TimeoutsConfig().wall_seconds  # set in the config file or the overrides
        if self._budget is not None and explicit and self._budget < wall:
            raise TaskEnvironmentError(
                f"the task's agent timeout ({self._budget:.0f}s) is shorter than one hoh role (timeouts.wall_seconds "
                f"= {wall:.0f}s): lower timeouts.wall_seconds, or give the task more time "
                "(--agent-timeout-multiplier)")

    def use_harness_bin(self) -> None:
        """The harness CLI is run here too (its version, its argv): its directory goes onto this process's PATH."""
        path = os.environ.get("PATH", "").split(os.pathsep)
        extra = [p for p in (self.options.harness_bin, os.environ.get("HOH_HARNESS_BIN")) if p and p not in path]
        if extra:
            os.environ["PATH"] = os.pathsep.join([*extra, *path])

    def with_frozen_inputs(self, config: HohConfig, task_dir: Path) -> HohConfig:
        """The harness's frozen inputs as its settings name them, else from the task's dir named after the
        harness (e.g. scripted/script.yaml); hoh freezes them into the workspace."""
        adapter = registry.adapter_class(config.harness.name)
        try:
            inputs = adapter.frozen_inputs(config.harness, task_dir / adapter.name)
        except UsageError as err:
            raise TaskEnvironmentError(f"{err} (a task may carry it in its {adapter.name}/ dir)") from None
        return apply_overrides(config, [], {frozen.setting: str(frozen.source) for frozen in inputs})

    # ---- run ---------------------------------------------------------------------------------
    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        started = time.monotonic()
        paths = self.paths
        paths.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(paths.spec, instruction)
        self._summary = {"status": RunStatus.RUNNING, "error": None}
        with ExitStack() as stack:
            config = self.run_config(environment, stack)
            await self.take_workdir(environment)
            self.write_summary(started)
            events = EventLoop(asyncio.get_running_loop())
            thread = asyncio.ensure_future(asyncio.to_thread(self.drive, config, environment, events, started))
            cut = None
            try:
                deadline = None
                if self._budget is not None:
                    deadline = self._budget - budget.reserve(self._budget) - (time.monotonic() - started)
                done, _ = await asyncio.wait({thread}, timeout=None if deadline is None else max(deadline, 1.0))
                if not done:
                    cut = RunStatus.OUT_OF_TIME, "the time budget ran out"
                    await self.stop(thread, events)
            except asyncio.CancelledError:  # Harbor's own timeout or a Ctrl-C: stop, put the candidate back
                await self.stop(thread, events)
                await self.finish(environment, context, started, (RunStatus.INTERRUPTED, "Harbor stopped the agent"),
                                  thread)
                raise
            await self.finish(environment, context, started, cut, thread)

    def run_config(self, environment: BaseEnvironment, stack: ExitStack) -> HohConfig:
        """This trial's hoh.yaml: the roles in its environment, the endpoint as this machine reaches it (hoh's
        mock model served here for `mock_llm`), the key in this process's environment for hoh's egress proxy."""
        flags: dict[str, Any] = {"environment.name": environment_name(environment)}
        url = self.hoh_config.harness.base_url
        if self.options.mock_llm:
            from ..testing.mock_llm import MockLLM
            script = Path(self.options.mock_llm).expanduser()
            if not script.is_file():
                raise TaskEnvironmentError(f"mock_llm: {script} not found; pass a hoh.testing.mock_llm script")
            mock = stack.enter_context(MockLLM(script=str(script), log_path=self.paths.mock_log))
            self.say(f"serving the mock model {script} at {mock.base_url}")
            url = mock.base_url
        elif url is not None:
            resolved = host_base_url(url)
            check_reachable(resolved, given=url)
            url = resolved
        flags["harness.base_url"] = url
        self._summary["base_url"] = url
        name = self.hoh_config.harness.api_key_env
        value = self._get_env(name) if name else None
        if name and value is not None:
            keys.give(name, value)  # for hoh's egress proxy only, never in this process's environment
        return apply_overrides(self.hoh_config, [], flags)

    async def take_workdir(self, environment: BaseEnvironment) -> None:
        """A_0: the task's workdir as the image ships it (files and git history alike), copied here."""
        workdir = shlex.quote(self._workdir)
        await environment.exec(f"mkdir -p {workdir}", timeout_sec=60)
        project = self.paths.project
        project.mkdir(parents=True, exist_ok=True)
        await environment.download_dir(self._workdir, project)

    def drive(self, config: HohConfig, environment: BaseEnvironment, events: EventLoop, started: float) -> Any:
        """The Runtime, in a thread of its own (it is synchronous), every role in the trial's environment."""
        own_writes()  # the guard between roles must not take another trial's Runtime's writes for its own
        try:
            return api.build(self.paths.spec, self.paths.workspace, config, project=self.paths.project,
                             notify=lambda kind, **fields: self.on_event(kind, fields, started),
                             given=Given(environment, events, TrialRole))
        except KeyboardInterrupt:  # stopped at once (the deadline, Harbor's cancel); the journal says so
            return None

    def on_event(self, kind: str, fields: dict[str, Any], started: float) -> None:
        if kind != "loop_done":
            return
        try:
            ws = open_workspace(self.paths.workspace)
            t = int(fields["loop"])
            entry = next(e for e in api.status(ws.paths.root)["loops"] if e["loop"] == t)
            if entry.get("candidate_id"):
                export_candidate(ws, t, str(fields["status"]), self.paths, self._workdir)
            self.write_summary(started)
            self.say(describe_loop(entry, self.hoh_config.loops))
        except Exception as err:  # noqa: BLE001 - the run goes on; the end exports nothing less
            self.logger.warning(terminal_text(f"hoh: could not record loop {fields.get('loop')}: {one_line(err)}"))

    async def stop(self, thread: asyncio.Future, events: EventLoop) -> None:
        """Stop the Runtime at once: before its next attempt (a stop request), and its attempt in flight (the
        loop's coroutines cancelled: the CLI's session is killed); then wait for it to journal its end."""
        if is_workspace(self.paths.workspace):
            StopFile(open_workspace(self.paths.workspace).paths.stop_request).write("the trial's deadline")
        events.interrupt()
        while not thread.done():
            try:
                await asyncio.wait({thread}, timeout=SETTLE_SECONDS)
                break
            except asyncio.CancelledError:
                continue

    async def finish(self, environment: BaseEnvironment, context: AgentContext, started: float,
                     cut: tuple[RunStatus, str] | None, thread: asyncio.Future) -> None:
        """The project back to the last finished loop's candidate, that candidate in the task's workdir, the
        summary written; then the trial's outcome."""
        error: BaseException | None = None
        report = None
        if thread.done():
            error = thread.exception()
            report = thread.result() if error is None else None
        done = 0
        if is_workspace(self.paths.workspace):
            ws = open_workspace(self.paths.workspace)
            done = finished_loops(ws)
            restore_project(ws)
            for t in range(1, done + 1):  # a loop the notification missed is still exported
                if ws.paths.loop(t).candidate.exists() and not self.paths.candidate_record(t).exists():
                    export_candidate(ws, t, ws_loop_status(ws, t), self.paths, self._workdir)
        await self.place_candidate(environment)
        status, message = self.outcome(report, error, cut, done)
        self._summary.update(status=status, error=message)
        self.write_summary(started)
        fill_context(context, self._summary)
        if message:
            self.say(message)
        self.raise_for(status, message, done)

    async def place_candidate(self, environment: BaseEnvironment) -> None:
        """The task's workdir becomes the project as it is here now (the last candidate, or A_0)."""
        workdir = shlex.quote(self._workdir)
        await environment.exec(f"find {workdir} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +", timeout_sec=600)
        await environment.upload_dir(self.paths.project, self._workdir)

    def outcome(self, report: Any, error: BaseException | None, cut: tuple[RunStatus, str] | None,
                done: int) -> tuple[RunStatus, str | None]:
        if isinstance(error, HohError):  # hoh refused its input here: nothing ran
            self._bad_input = True
            return RunStatus.FAILED, one_line(error)
        if error is not None:
            raise error
        if cut is not None:
            status, why = cut
            if done:
                return status, f"{why} in loop {done + 1}; the workdir holds loop {done}'s candidate"
            return status, f"{why} ({self.budget_text()}) {self.first_loop_stage()}"
        return report.status, report.error

    def raise_for(self, status: RunStatus, message: str | None, done: int) -> None:
        """Bad input and a budget too short for one loop end the trial ungraded; hoh stopping after
        that is graded (the workdir holds its last finished loop's candidate)."""
        if self._bad_input or (status in (RunStatus.OUT_OF_TIME, RunStatus.INTERRUPTED) and not done):
            raise TaskEnvironmentError(message or str(status))
        if status in (RunStatus.FAILED, RunStatus.ERROR, RunStatus.QUOTA_EXHAUSTED):
            raise NonZeroAgentExitCodeError(f"hoh stopped after {done} loops: {message}")

    # ---- what the run says ---------------------------------------------------------------------
    def first_loop_stage(self) -> str:
        steps = RunHistory.read(Journal(open_workspace(self.paths.workspace).paths.journal)).steps \
            if is_workspace(self.paths.workspace) else {}
        if (1, "planner") not in steps:
            return "before hoh's first role (the planner of loop 1) finished; give the task a longer " \
                   "[agent] timeout_sec, or run harbor with --agent-timeout-multiplier"
        stage = "verified" if (1, "freeze") in steps else "frozen"
        return f"in loop 1 before its candidate was {stage}; no loop finished, give the task a longer " \
               "[agent] timeout_sec, or run harbor with --agent-timeout-multiplier"

    def budget_text(self) -> str:
        if self._budget is None:
            return "no budget"
        return f"{self._budget - budget.reserve(self._budget):.0f}s for hoh"

    def say(self, line: str) -> None:
        """A line for run.log and Harbor's log, which a terminal shows: a role's text in it is text only."""
        line = terminal_text(line)
        self.paths.root.mkdir(parents=True, exist_ok=True)
        with open(self.paths.log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        self.logger.info(line)

    def write_summary(self, started: float) -> None:
        ws_root = self.paths.workspace
        status = api.status(ws_root) if is_workspace(ws_root) else None
        loops = [e for e in (status or {}).get("loops", []) if e["status"] != LoopStatus.RUNNING]
        for entry in loops:
            if self.paths.candidate_record(entry["loop"]).exists():
                entry["artifact"] = str(self.paths.candidate_dir(entry["loop"]))
        self._summary.update({
            "schema_version": SUMMARY_SCHEMA_VERSION, "target_loops": self.hoh_config.loops,
            "loops_finished": len(loops), "budget_seconds": self._budget,
            "seconds": round(time.monotonic() - started, 2), "workdir": self._workdir,
            "workspace": str(ws_root), "harness": status["harness"] if status else None,
            "usage": status["usage"] if status else None, "loops": loops})
        atomic_write_json(self.paths.summary, self._summary)

    def populate_context_post_run(self, context: AgentContext) -> None:
        """After a cancelled run, the summary on disk still says what was done."""
        path = self.paths.summary
        if path.is_file():
            fill_context(context, json.loads(path.read_text(encoding="utf-8")))
