"""`HohAgent`: hoh as a Harbor agent. The HoH loop runs inside the task's environment, on the
task's working directory, under the task's agent timeout.

    harbor run -p TASK --agent hoh.harbor:HohAgent --env docker -m MODEL \\
        --ak harness=opencode --ak loops=3 [--ak base_url=URL --ak api_key_env=NAME]

`setup` checks the environment (Python >= 3.11, git), uploads hoh and the harness CLI; `run`
writes the instruction as the spec and starts `python3 -m hoh.taskrun` there, which leaves the
workspace, a summary and one candidate artifact per finished loop where Harbor collects them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from harbor.agents.agent_auth_resolution import ResolvedModelConnection
from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import NonZeroAgentExitCodeError
from harbor.agents.options import AgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.paths import EnvironmentPaths
from pydantic import Field, field_validator

import hoh

from ..config import HohConfig, TimeoutsConfig, apply_overrides, dump_config, load_config
from ..errors import TaskEnvironmentError, UsageError
from ..harness import registry
from ..paths import TaskRunPaths
from ..statuses import RunStatus
from . import budget, install
from .context import fill_context, log_lines

SPEC, CONFIG, MOCK = (install.RUN / name for name in ("spec.md", "hoh.yaml", "mock-llm.json"))
PID = "/tmp/hoh-taskrun.pid"
"""Written by the driver's shell as whichever user the task runs its agent as."""


class HohAgentOptions(AgentOptions):
    """`--ak` options of the hoh agent (`harbor agent schema hoh.harbor:HohAgent`)."""

    harness: str | None = Field(None, description="The harness CLI hoh drives: opencode, pi, codex, claude, scripted "
                                "or package.module:Class (default: the config's harness.name; one is required).")
    loops: int | None = Field(None, ge=1, description="Loops to run (default: the config's, else 3); the task's "
                              "agent timeout may end the run earlier.")
    api_key_env: str | None = Field(None, description="Name of the variable holding the endpoint's API key "
                                    "(forwarded into the environment from --ae or this machine).")
    config: str | None = Field(None, description="A hoh.yaml on this machine to start from.")
    overrides: list[str] = Field(default_factory=list,
                                 description='hoh settings as KEY=VALUE, e.g. ["mode=developer_only"].')
    script: str | None = Field(None, description="The scripted harness's script (harness.script); default: the "
                               "task's scripted/script.yaml.")
    mock_llm: str | None = Field(None, description="A hoh.testing.mock_llm script: serve it inside the environment "
                                 "and point the harness at it (offline tests of real CLIs).")
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
        """hoh.yaml for the run: the config file (or hoh's defaults), then the options, then `overrides`; the
        harness's frozen inputs (the scripted agent's script) still name this machine's files (see
        `upload_inputs`)."""
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

    # ---- setup -------------------------------------------------------------------------------
    async def setup(self, environment: BaseEnvironment) -> None:
        task = budget.task_of(environment)
        if task.has_steps:
            raise TaskEnvironmentError("multi-step tasks ([[steps]]) are not supported by the hoh agent: hoh builds "
                                       "from one spec, and grading one step's loops would need the earlier steps "
                                       "replayed first; run the steps as separate tasks")
        facts = await install.probe(environment)
        self._workdir = environment.task_env_config.workdir or facts.cwd
        self._budget = budget.agent_timeout(environment, task)
        self.check_budget()
        await install.install_hoh(environment, facts)
        adapter = registry.create(self.hoh_config.harness)
        await install.install_harness(environment, adapter, facts, self.search_path())
        await self.upload_inputs(environment, Path(task.task_dir))
        await environment.exec(f"chmod -R a+rX {install.ROOT}", user="root", timeout_sec=120)

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

    def search_path(self) -> str:
        extra = [p for p in (self.options.harness_bin, os.environ.get("HOH_HARNESS_BIN")) if p]
        return os.pathsep.join([*extra, os.environ.get("PATH", "")])

    async def upload_inputs(self, environment: BaseEnvironment, task_dir: Path) -> None:
        """The harness's frozen inputs (as its settings name them, else from the task's dir named after the
        harness, e.g. scripted/script.yaml) uploaded to the run dir, and hoh.yaml pointed at the uploads."""
        adapter = registry.adapter_class(self.hoh_config.harness.name)
        try:
            inputs = adapter.frozen_inputs(self.hoh_config.harness, task_dir / adapter.name)
        except UsageError as err:
            raise TaskEnvironmentError(f"{err} (a task may carry it in its {adapter.name}/ dir)") from None
        for frozen in inputs:
            await environment.upload_file(frozen.source, str(install.RUN / frozen.name))
            self.hoh_config = apply_overrides(self.hoh_config, [],
                                              {frozen.setting: str(install.RUN / frozen.name)})
        with tempfile.TemporaryDirectory(prefix="hoh-inputs-") as tmp:
            config = Path(tmp, "hoh.yaml")
            config.write_text(dump_config(self.hoh_config), encoding="utf-8")
            await environment.upload_file(config, str(CONFIG))
        if self.options.mock_llm:
            mock = Path(self.options.mock_llm).expanduser()
            if not mock.is_file():
                raise TaskEnvironmentError(f"mock_llm: {mock} not found; pass a hoh.testing.mock_llm script")
            await environment.upload_file(mock, str(MOCK))

    # ---- run ---------------------------------------------------------------------------------
    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="hoh-spec-") as tmp:
            spec = Path(tmp, "spec.md")
            spec.write_text(instruction, encoding="utf-8")
            await environment.upload_file(spec, str(SPEC))
        hoh_budget = None
        if self._budget is not None:
            hoh_budget = self._budget - budget.reserve(self._budget) - (time.monotonic() - started)
        try:
            result = await environment.exec(self.taskrun_command(environment, hoh_budget), env=self.key_env(),
                                            timeout_sec=None if self._budget is None else int(self._budget) + 60)
        except asyncio.CancelledError:  # Harbor's timeout: stop hoh so it restores the workdir first
            await self.stop_taskrun(environment)
            raise
        summary = await self.read_summary(environment)
        fill_context(context, summary)
        for line in log_lines(result.stdout):
            self.logger.info(line)
        self.raise_for(result.return_code, summary, result.stderr)

    def taskrun_command(self, environment: BaseEnvironment, hoh_budget: float | None) -> str:
        env_paths = EnvironmentPaths.for_os(environment.os)
        argv = ["python3", "-m", "hoh.taskrun", "--spec", str(SPEC), "--project", self._workdir, "--config", str(CONFIG),
                "--loops", str(self.hoh_config.loops), "--logs", str(env_paths.agent_dir),
                "--artifacts", str(env_paths.artifacts_dir)]
        if hoh_budget is not None:
            argv += ["--budget", f"{max(hoh_budget, 1.0):.1f}"]
        if self.options.mock_llm:
            argv += ["--mock-llm", str(MOCK)]
        # exec: the pid file names the driver itself, so a cancelled run can stop it.
        return (f"echo $$ > {PID}; export PYTHONPATH={install.SITE} PATH={install.BIN}:$PATH; "
                f"exec {shlex.join(argv)}")

    def key_env(self) -> dict[str, str]:
        """The endpoint's API key, by the name hoh was told, from --ae or this machine's environment."""
        name = self.hoh_config.harness.api_key_env
        value = self._get_env(name) if name else None
        return {name: value} if name and value is not None else {}

    async def stop_taskrun(self, environment: BaseEnvironment) -> None:
        pid = f"$(cat {PID})"
        await environment.exec(f"kill -TERM {pid} 2>/dev/null; for i in $(seq 1 80); do kill -0 {pid} 2>/dev/null "
                               "|| exit 0; sleep 0.5; done", timeout_sec=60)

    async def read_summary(self, environment: BaseEnvironment) -> dict[str, Any]:
        paths = TaskRunPaths(EnvironmentPaths.for_os(environment.os).agent_dir, EnvironmentPaths.artifacts_dir)
        result = await environment.exec(f"cat {paths.summary}", timeout_sec=60)
        try:
            return json.loads(result.stdout or "")
        except ValueError:
            return {}

    def raise_for(self, code: int, summary: dict[str, Any], stderr: str | None) -> None:
        """Bad input and a budget too short for one loop end the trial ungraded; hoh stopping after
        that is graded (the workdir holds its last finished loop's candidate)."""
        error = summary.get("error") or ((stderr or "").strip().splitlines() or [f"exit code {code}"])[-1]
        if code == 0:
            return
        if code == 2 or summary.get("status") in (RunStatus.OUT_OF_TIME, RunStatus.INTERRUPTED):
            raise TaskEnvironmentError(error)
        raise NonZeroAgentExitCodeError(f"hoh stopped after {summary.get('loops_finished', 0)} loops: {error}")

    def populate_context_post_run(self, context: AgentContext) -> None:
        """After a cancelled run, the summary Harbor downloaded with the logs still says what was done."""
        path = Path(TaskRunPaths.for_trial(self.logs_dir.parent).summary)
        if path.is_file():
            fill_context(context, json.loads(path.read_text(encoding="utf-8")))
