"""What a trial runs: the mode and the ablations, turned into one hoh config per task.

    hoh           Planner → Developer → QA, T loops (the default)
    vanilla       the harness alone, one Developer pass with the spec as its plan
    continuation  the same harness re-run T times on its own output, no Planner, no QA
    --ablate plan-update | evidence | warm-start   (hoh mode; repeatable) switch one mechanism off

The runner's settings that decide the results live in `BenchSettings`, stored in OUT/run.json:
a rerun on the same OUT must name the same settings (executor and job count may differ).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config import HohConfig, apply_overrides
from ..errors import UsageError

Mode = Literal["hoh", "vanilla", "continuation"]
MODES: tuple[str, ...] = ("hoh", "vanilla", "continuation")
ABLATIONS: dict[str, str] = {"plan-update": "plan_update", "evidence": "evidence_feedback", "warm-start": "warm_start"}
"""--ablate name → the `mechanisms` switch it turns off."""
DEFAULT_LOOPS = 3


class BenchSettings(BaseModel):
    """Everything that decides what a run's trials do; two runs with equal settings are comparable."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    suite: str
    """A resolved Harbor directory, or `programbench[:REGEX]`."""
    task_filter: str | None = None
    """A regex on task ids; None runs every task."""
    mode: Mode = "hoh"
    ablate: list[str] = Field(default_factory=list)
    """Mechanisms switched off (names from ABLATIONS), sorted."""
    loops: int = Field(DEFAULT_LOOPS, ge=1)
    """T: each trial is graded after loops 1..T."""
    grade_on_host: bool = False
    """Run tests/test.sh with this machine's tools even when the task names a Docker environment."""
    hoh: dict[str, Any] = Field(default_factory=dict)
    """The hoh config every trial starts from (harness, model, timeouts, policy, `--set` overrides)."""

    def base_config(self) -> HohConfig:
        return HohConfig.model_validate(self.hoh)


def default_loops(mode: str, harness: str) -> int:
    """vanilla is one pass by definition; the oracle needs one loop to apply its solution."""
    return 1 if mode == "vanilla" or harness == "oracle" else DEFAULT_LOOPS


def check(mode: str, ablate: list[str], loops: int) -> list[str]:
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
    return sorted(set(ablate))


def trial_config(settings: BenchSettings) -> HohConfig:
    """The hoh config of every trial of this run (the task's own script/solution are added per trial)."""
    config = settings.base_config()
    flags: dict[str, Any] = {"loops": settings.loops,
                             "mode": "hoh" if settings.mode == "hoh" else "developer_only"}
    for name in settings.ablate:
        flags[f"mechanisms.{ABLATIONS[name]}"] = False
    # apply_overrides skips None values only, so False switches really land.
    return apply_overrides(config, [], flags)
