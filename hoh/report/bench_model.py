"""What the benchmark HTML report draws: runs × tasks × loops of scores, with tokens, cost, errors.

The model is independent of how a benchmark's results are stored; `bench_adapter.py` fills it from
today's `hoh bench run` OUT directory. Definitions (the same as `hoh bench report`'s summary):
- `BenchTrial.scores[k-1]` is the task's score after loop k; a trial that stopped early carries its
  last graded score forward (its artifact did not change). None: never graded.
- A run's HoH@k is the mean over its *scored* trials (those with a final score) of their score
  after loop k; trials that could not be graded are counted by outcome, not averaged as zeros.
- Pass rate at k: the share of scored trials whose score after loop k is ≥ the pass threshold.
- Tokens per point: input + output tokens of the scored trials over their summed final score in
  percentage points (a final score of 1.0 is 100 points). None when no point was scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class BenchTrial:
    """One task's trial within a run."""

    task: str
    outcome: str
    """completed | error | pending | invalid (or any other word the runner uses)."""
    scores: list[float | None]
    """scores[k-1]: the score after loop k, carried forward; as many entries as the run has loops."""
    tokens: dict[str, int] | None = None
    """input, cached_input, output, reasoning; None when unknown."""
    cost_usd: float | None = None
    wall_seconds: float | None = None
    error: str | None = None

    @property
    def final(self) -> float | None:
        return self.scores[-1] if self.scores else None

    @property
    def total_tokens(self) -> int | None:
        if self.tokens is None:
            return None
        return (self.tokens.get("input") or 0) + (self.tokens.get("output") or 0)


@dataclass
class BenchRun:
    """One benchmark run: one harness/model in one mode (with its ablations) over a suite."""

    label: str
    harness: str
    model: str | None
    mode: str
    ablate: list[str]
    loops: int
    source: str
    """Where the run's results live (shown, never opened by the renderer)."""
    trials: list[BenchTrial] = field(default_factory=list)
    pass_threshold: float = 1.0

    def scored(self) -> list[BenchTrial]:
        return [t for t in self.trials if t.final is not None]

    def curve(self) -> list[dict[str, Any]]:
        """Per loop k: mean, min, max and pass rate over the scored trials, and how many were graded."""
        points = []
        scored = self.scored()
        for k in range(1, self.loops + 1):
            values = [t.scores[k - 1] for t in scored if len(t.scores) >= k and t.scores[k - 1] is not None]
            points.append({
                "loop": k, "n": len(values),
                "mean": round(sum(values) / len(values), 4) if values else None,
                "min": min(values) if values else None, "max": max(values) if values else None,
                "pass_rate": round(sum(v >= self.pass_threshold for v in values) / len(values), 4) if values else None})
        return points

    def final_mean(self) -> float | None:
        finals = [t.final for t in self.scored()]
        return round(sum(finals) / len(finals), 4) if finals else None

    def final_score(self, task: str) -> float | None:
        return next((t.final for t in self.trials if t.task == task), None)

    def trial(self, task: str) -> BenchTrial | None:
        return next((t for t in self.trials if t.task == task), None)

    def tokens(self) -> int:
        return sum(t.total_tokens or 0 for t in self.trials)

    def cost(self) -> float | None:
        known = [t.cost_usd for t in self.trials if t.cost_usd is not None]
        return round(sum(known), 4) if known else None

    def tokens_per_point(self) -> float | None:
        scored = self.scored()
        points = 100 * sum(t.final or 0 for t in scored)
        if not points or any(t.total_tokens is None for t in scored):
            return None
        return round(sum(t.total_tokens or 0 for t in scored) / points, 1)

    def outcomes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.trials:
            out[t.outcome] = out.get(t.outcome, 0) + 1
        return dict(sorted(out.items()))

    def errors(self) -> list[BenchTrial]:
        """Trials that did not complete, or completed with a note: each shown with its reason."""
        return [t for t in self.trials if t.outcome != "completed" or t.error]


@dataclass
class BenchReport:
    """One or more runs shown together (the first is the reference for deltas)."""

    runs: list[BenchRun]
    title: str = "hoh bench report"

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        for run in self.runs:  # two runs with equal settings still need distinct names
            seen[run.label] = seen.get(run.label, 0) + 1
        for run in self.runs:
            if seen[run.label] > 1:
                run.label = f"{run.label} ({run.source.rstrip('/').rsplit('/', 1)[-1]})"

    def task_ids(self) -> list[str]:
        return sorted({t.task for run in self.runs for t in run.trials})

    @property
    def max_loops(self) -> int:
        return max([r.loops for r in self.runs] + [1])
