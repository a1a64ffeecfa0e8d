"""What a benchmark run is: suite, Harbor environment, agent, mode, ablations, loops.

    hoh           Planner → Developer → QA, T loops (the default), graded after every loop
    vanilla       the harness alone: one Developer pass with the spec as its plan
    continuation  the same harness re-run T times on its own output, no Planner, no QA
    --ablate plan-update | evidence | warm-start   (hoh mode; repeatable) switch one mechanism off
    --harness oracle   Harbor's own oracle agent (the task's solution/solve.sh), one pass

Every setting that decides the results is in `BenchSettings`, stored in OUT/run.json: a rerun on
the same OUT must name the same settings (only `--jobs` may differ). Harbor's own knobs pass through:
`--agent-timeout-multiplier`, `--ak` (agent kwargs), `--ek` (environment kwargs) and `--ae` (agent env
vars, stored by name only: see `agent_env`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError

Mode = Literal["hoh", "vanilla", "continuation"]
MODES: tuple[str, ...] = ("hoh", "vanilla", "continuation")
ABLATIONS: dict[str, str] = {"plan-update": "plan_update", "evidence": "evidence_feedback", "warm-start": "warm_start"}
"""--ablate name → the `mechanisms` switch it turns off."""
DEFAULT_LOOPS = 3
ORACLE = "oracle"
"""Not a hoh harness: Harbor's own oracle agent, which runs the task's solution/solve.sh."""
HOH_AGENT = "hoh.harbor:HohAgent"
CANDIDATE_AGENT = "hoh.harbor:CandidateAgent"
BENCH_OVERRIDES = ["policy.on_role_failure=continue"]
"""A benchmark goes on past a failed role (the loop is recorded as failed); --config or --set change it."""
HOH_AGENT_KWARGS = {"harness": "--harness", "loops": "--loops", "overrides": "--set", "config": "--config",
                    "base_url": "--base-url", "api_key_env": "--api-key-env"}
"""The hoh agent's kwargs that hoh's own options set: an --ak naming one is refused (one setting, one place)."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BenchSettings(BaseModel):
    """Everything that decides what a run's trials do; two runs with equal settings are comparable."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    suite: str
    """A resolved Harbor task dir or dir of tasks, a Harbor dataset (NAME[@VERSION]), or programbench[:REGEX]."""
    include: list[str] = Field(default_factory=list)
    """Task-name globs (Harbor's task_names); empty runs every task."""
    env: str = "docker"
    """A Harbor environment type (docker, podman, daytona, modal, ...) or an import path module:Class."""
    harness: str
    """The harness hoh drives in every role, or `oracle` (Harbor's oracle agent instead of hoh); required."""
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    """The name of the variable holding the endpoint's key (its value never leaves this machine's environment)."""
    mode: Mode = "hoh"
    ablate: list[str] = Field(default_factory=list)
    """Mechanisms switched off (names from ABLATIONS), sorted."""
    loops: int = Field(DEFAULT_LOOPS, ge=1)
    """T: each trial is graded after loops 1..T."""
    hoh: dict[str, Any] | None = None
    """The hoh.yaml every trial starts from (--config), frozen into OUT/hoh.yaml; None: hoh's defaults."""
    overrides: list[str] = Field(default_factory=list)
    """hoh settings (--set KEY=VALUE), applied last."""
    programbench_download: bool = False
    """ProgramBench only: fetch missing test data from its hub (with a timeout) instead of failing."""
    calibrate: bool = True
    """Grade each task's reference solution first (calibrate.py); --no-calibrate skips it."""
    check_only: bool = False
    """`hoh bench check`: only the calibration, no agent."""
    agent_timeout_multiplier: float | None = Field(None, gt=0)
    """Harbor's agent_timeout_multiplier for the agent job (the task's agent timeout × this); None: Harbor's 1."""
    agent_kwargs: dict[str, Any] = Field(default_factory=dict)
    """--ak KEY=VALUE: more kwargs of the agent (hoh's HohAgent options, or Harbor's oracle), parsed as Harbor's."""
    agent_env: list[str] = Field(default_factory=list)
    """--ae: names of the variables the agent gets, sorted. Only names: values may be secrets, so they are never
    written under OUT; each job's config says `${NAME}` and Harbor reads the value from its own process
    environment, which hoh gives it. A rerun checks the names, not the values."""
    environment_kwargs: dict[str, Any] = Field(default_factory=dict)
    """--ek KEY=VALUE: kwargs of Harbor's environment (e.g. docker's keep_containers), for every job of the run."""

    @property
    def is_oracle(self) -> bool:
        return self.harness == ORACLE

    @property
    def calibrates(self) -> bool:
        """The oracle's own run is its calibration, and ProgramBench's package grades by its own tests."""
        packaged = self.suite == "programbench" or self.suite.startswith("programbench:")
        return self.calibrate and (self.check_only or not self.is_oracle) and not packaged

    def hoh_overrides(self) -> list[str]:
        """What the mode and the ablations add to the hoh config, before the user's --set."""
        extra = [] if self.hoh is not None else list(BENCH_OVERRIDES)
        if self.mode != "hoh":
            extra.append("mode=developer_only")
        extra += [f"mechanisms.{ABLATIONS[name]}=false" for name in self.ablate]
        return extra + list(self.overrides)

    def agent_config(self, config_path: str | None) -> dict[str, Any]:
        """The agent of every trial, as a Harbor AgentConfig (hoh's agent, or Harbor's oracle)."""
        if self.is_oracle:
            return self.with_env({"name": ORACLE, **({"kwargs": dict(self.agent_kwargs)} if self.agent_kwargs else {})})
        kwargs: dict[str, Any] = {"harness": self.harness, "loops": self.loops, "overrides": self.hoh_overrides()}
        for key in ("base_url", "api_key_env"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if config_path is not None:
            kwargs["config"] = config_path
        agent: dict[str, Any] = {"import_path": HOH_AGENT, "kwargs": {**kwargs, **self.agent_kwargs}}
        if self.model:
            agent["model_name"] = self.model
        return self.with_env(agent)

    def with_env(self, agent: dict[str, Any]) -> dict[str, Any]:
        # `${NAME}` is Harbor's own template (harbor.utils.env.resolve_env_vars, applied when the agent is
        # made): the job's config.json, its trials' config.json and result.json keep the template, never a value.
        if self.agent_env:
            agent["env"] = {name: f"${{{name}}}" for name in self.agent_env}
        return agent

    def environment_config(self) -> dict[str, Any]:
        """Harbor's EnvironmentConfig: a type name, or a custom class by import path; with the --ek kwargs."""
        config: dict[str, Any] = {"import_path": self.env} if ":" in self.env else {"type": self.env}
        if self.environment_kwargs:
            config["kwargs"] = dict(self.environment_kwargs)
        return config

    def label(self) -> str:
        """harness/model · mode · −ablations, as reports name the run."""
        who = f"{self.harness}{'/' + self.model if self.model else ''}"
        if self.is_oracle:
            return who
        return " · ".join(filter(None, [who, self.mode, " ".join(f"−{a}" for a in self.ablate)]))


def default_loops(mode: str, harness: str) -> int:
    """vanilla is one pass by definition, and so is Harbor's oracle."""
    return 1 if mode == "vanilla" or harness == ORACLE else DEFAULT_LOOPS


def check(mode: str, ablate: list[str], loops: int, harness: str) -> list[str]:
    """Validate a mode/ablation/loops combination; return the ablations sorted and deduplicated."""
    if mode not in MODES:
        raise UsageError(f"unknown mode '{mode}'; choose one of: {', '.join(MODES)}")
    unknown = sorted(set(ablate) - set(ABLATIONS))
    if unknown:
        raise UsageError(f"unknown ablation '{unknown[0]}'; choose from: {', '.join(ABLATIONS)}")
    if ablate and mode != "hoh":
        raise UsageError(f"--ablate switches off a mechanism of hoh mode; --mode {mode} has none to switch off")
    if mode == "vanilla" and loops != 1:
        raise UsageError("--mode vanilla is one Developer pass; drop --loops, or use --mode continuation for T passes")
    if harness == ORACLE and (mode != "hoh" or ablate or loops != 1):
        raise UsageError("--harness oracle runs Harbor's oracle agent once (the task's solution/solve.sh): "
                         "it has no modes, ablations or loops")
    return sorted(set(ablate))


def parse_kwargs(option: str, items: list[str]) -> dict[str, Any]:
    """--ak / --ek KEY=VALUE as `harbor run` parses them: VALUE as JSON, True/False/None, else a string."""
    parsed: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise UsageError(f"{option} {item!r}: expected KEY=VALUE")
        try:
            parsed[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key] = {"True": True, "False": False, "None": None}.get(value, value)
    return parsed


def parse_agent_env(items: list[str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """--ae NAME=VALUE, or --ae NAME for the value NAME has here: name → value, to hand to Harbor's process
    (never to a file)."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"--ae {name!r}: not a variable name; pass --ae NAME (its value here) or NAME=VALUE")
        if not eq and name not in environ:
            raise UsageError(f"--ae {name}: {name} is not set here; set it, or pass --ae {name}=VALUE")
        values[name] = value if eq else environ[name]
    return values


def check_agent_kwargs(kwargs: dict[str, Any], harness: str) -> None:
    """An --ak that hoh's own options already set is refused, naming the option to use."""
    if harness == ORACLE:
        return
    for key in kwargs:
        if key in HOH_AGENT_KWARGS:
            raise UsageError(f"--ak {key}: hoh sets it from {HOH_AGENT_KWARGS[key]}; use that option")
