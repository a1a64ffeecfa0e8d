"""What the benchmark HTML report draws: runs × tasks × loops, each loop in its state, every reward key,
calibration, errors with their cause, tokens and cost; and the comparisons of the runs against the first.

The model is independent of how a benchmark's results are stored; `bench_adapter.py` fills it from
today's `hoh bench run` OUT directory. Definitions (the same as `hoh bench report`'s summary, whose
functions it reuses: hoh/bench/report.py):
- Each loop is in one state (hoh.bench.records.LoopState): graded, carried (an earlier loop's grade:
  its candidate did not change), failed (a role failed), not_run (the trial ended before it), ungraded
  (its candidate could not be graded) or pending. Only graded and carried loops have a score.
- A trial is *scored* when its outcome is completed and every loop has a score; an error, a pending
  trial and a task not gradable here (its reference solution cannot reach the maximum) are counted
  by outcome and shown with their cause, never averaged in as zeros.
- A run's HoH@k is the mean over its scored trials of the headline score after loop k; each reward key
  has its own curve over the same trials (`key_curve`).
- Pass rate at k: the share of scored trials whose score after loop k is ≥ the pass threshold.
- Tokens per point: input + output tokens of the scored trials over their summed final score in
  percentage points (a final score of 1.0 is 100 points). None when no point was scored.
- A comparison (B against the first run A) counts only the tasks both scored, and has no HoH@k value
  for a loop a run did not run; its notes say so (hoh.bench.report.compare makes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..bench.records import LoopState, Outcome
from ..bench.report import PASS_THRESHOLD, is_scored
from ..bench.settings import ORACLE

SCORED_STATES = (LoopState.GRADED, LoopState.CARRIED)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


@dataclass(frozen=True)
class BenchLoop:
    """One loop of a trial: its state, its grade (every reward key and the headline score) or why it has none."""

    loop: int
    state: LoopState
    score: float | None = None
    """The headline score; None unless graded or carried."""
    rewards: dict[str, float] | None = None
    graded_loop: int | None = None
    """Whose candidate the grade is of: the loop itself, an earlier one when carried (0: the task as shipped)."""
    cause: str | None = None
    """The one telling line of `error`."""
    error: str | None = None
    note: str | None = None

    @property
    def carried_from(self) -> int | None:
        """The loop whose grade this one carries; None when it is graded on its own (or not at all)."""
        return self.graded_loop if self.state is LoopState.CARRIED else None

    @property
    def is_scored(self) -> bool:
        return self.state in SCORED_STATES and self.score is not None


@dataclass(frozen=True)
class BenchCalibration:
    """Whether the task can be graded here: its reference solution graded once in the run's environment."""

    state: str = "off"
    """gradable | not_gradable | no_solution | off | pending (hoh.bench.calibrate.Calibration)."""
    reason: str | None = None
    telling: list[str] = field(default_factory=list)
    """The verifier's own lines that say why (`Name or service not known`)."""
    rewards: dict[str, float] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> BenchCalibration:
        data = data or {}
        return cls(data.get("state") or "off", data.get("reason"), list(data.get("telling") or []),
                   data.get("rewards"))


@dataclass
class BenchTrial:
    """One task's trial within a run."""

    task: str
    outcome: str
    """completed | error | pending | not_gradable (hoh.bench.records.Outcome), or invalid (Harbor skips the dir)."""
    loops: list[BenchLoop]
    """loops[k-1]: loop k; as many entries as the run has loops."""
    tokens: dict[str, int] | None = None
    """input, cached_input, output, reasoning; None when unknown."""
    cost_usd: float | None = None
    wall_seconds: float | None = None
    error: str | None = None
    """The full text of the first error (a loop's, or why the task is not gradable here)."""
    cause: str | None = None
    note: str | None = None
    """Harbor's exception on a trial whose loops were all finished (full text); note_cause its telling line."""
    note_cause: str | None = None
    calibration: BenchCalibration = field(default_factory=BenchCalibration)

    @property
    def scores(self) -> list[float | None]:
        return [entry.score for entry in self.loops]

    def scored(self) -> bool:
        """Counted in the means: completed, with a score after every loop (hoh.bench.report.is_scored)."""
        return is_scored({"outcome": self.outcome, "scores": self.scores})

    @property
    def final(self) -> float | None:
        return self.scores[-1] if self.loops else None

    @property
    def not_gradable(self) -> bool:
        return self.outcome == Outcome.NOT_GRADABLE

    def keys(self) -> list[str]:
        return sorted({key for entry in self.loops for key in (entry.rewards or {})})

    @property
    def total_tokens(self) -> int | None:
        if self.tokens is None:
            return None
        return (self.tokens.get("input") or 0) + (self.tokens.get("output") or 0)

    def loop_errors(self) -> list[BenchLoop]:
        """The loops with an error of their own, the first one's text being the trial's `error`."""
        return [entry for entry in self.loops if entry.error]


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
    pass_threshold: float = PASS_THRESHOLD
    headline: str = "reward"
    """What the headline score is of: --metric KEY, else reward, the only key or the mean of the keys."""

    @property
    def one_pass(self) -> bool:
        """A run that is one pass by design (vanilla, Harbor's oracle): a reference level at every k."""
        return self.mode == "vanilla" or self.harness == ORACLE

    def scored(self) -> list[BenchTrial]:
        return [t for t in self.trials if t.scored()]

    def curve(self) -> list[dict[str, Any]]:
        """Per loop k: mean, min, max and pass rate over the scored trials, and how many were graded."""
        points = []
        scored = self.scored()
        for k in range(1, self.loops + 1):
            values = [t.scores[k - 1] for t in scored if len(t.loops) >= k and t.scores[k - 1] is not None]
            points.append({
                "loop": k, "n": len(values), "mean": _mean(values),
                "min": min(values) if values else None, "max": max(values) if values else None,
                "pass_rate": _mean([1.0 if v >= self.pass_threshold else 0.0 for v in values])})
        return points

    def keys(self) -> list[str]:
        """Every reward key some scored trial reports (the ones with a curve of their own)."""
        return sorted({key for t in self.scored() for key in t.keys()})

    def all_keys(self) -> list[str]:
        return sorted({key for t in self.trials for key in t.keys()})

    def key_curve(self, key: str) -> list[dict[str, Any]]:
        """Per loop k: the mean of reward `key` over the scored trials that report it (as the summary's by_key)."""
        points = []
        for k in range(1, self.loops + 1):
            values = [float((t.loops[k - 1].rewards or {})[key]) for t in self.scored()
                      if len(t.loops) >= k and key in (t.loops[k - 1].rewards or {})]
            points.append({"loop": k, "mean": _mean(values), "n": len(values)})
        return points

    def shows_keys(self) -> bool:
        """Whether the keys say more than the headline: several of them, or one named otherwise."""
        keys = self.all_keys()
        return len(keys) > 1 or (len(keys) == 1 and keys[0] != self.headline)

    def final_mean(self) -> float | None:
        return _mean([t.final for t in self.scored() if t.final is not None])

    def final_score(self, task: str) -> float | None:
        """The task's final score if it is scored; None for an error, a task not gradable here, a missing one."""
        trial = self.trial(task)
        return trial.final if trial is not None and trial.scored() else None

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
        return _counts(t.outcome for t in self.trials)

    def calibrations(self) -> dict[str, int]:
        return _counts(t.calibration.state for t in self.trials)

    def left_out(self) -> dict[str, int]:
        """The trials not in the means, by outcome."""
        return _counts(t.outcome for t in self.trials if not t.scored())

    def errors(self) -> list[BenchTrial]:
        """Trials not scored (an error, not gradable, pending, invalid), or scored with Harbor's note."""
        return [t for t in self.trials if not t.scored() or t.note or t.error]

    def carried(self) -> int:
        return sum(entry.state is LoopState.CARRIED for t in self.trials for entry in t.loops)


def _counts(words) -> dict[str, int]:
    out: dict[str, int] = {}
    for word in words:
        out[str(word)] = out.get(str(word), 0) + 1
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class CompareRow:
    metric: str
    a: float | int | None
    b: float | int | None
    delta: float | int | None


@dataclass(frozen=True)
class BenchComparison:
    """Run `other` (B) against the first run (A), as hoh.bench.report.compare makes it."""

    other: int
    """B's index in the report's runs."""
    rows: list[CompareRow]
    """HoH@k over the tasks both scored (None for a loop a run did not run), each key, pass rate, tokens, cost."""
    deltas: dict[str, float | None]
    """Per task: B's final score − A's, only where both scored."""
    task_notes: dict[str, str]
    """Per task not in the deltas: why (only in A, not scored in B: its cause)."""
    matched: list[str]
    notes: list[str]
    """What does not match: task sets, loop counts, headline metrics."""
    win_rate: dict[str, Any]

    @classmethod
    def from_json(cls, other: int, data: dict[str, Any]) -> BenchComparison:
        return cls(other, [CompareRow(r["metric"], r["a"], r["b"], r["delta"]) for r in data["rows"]],
                   {t["task"]: t["delta"] for t in data["tasks"]},
                   {t["task"]: t["note"] for t in data["tasks"] if t.get("note")},
                   list(data["matched"]), list(data["notes"]), dict(data["b_win_rate"]))


@dataclass
class BenchReport:
    """One or more runs shown together (the first is the reference for deltas)."""

    runs: list[BenchRun]
    comparisons: list[BenchComparison] = field(default_factory=list)
    """Each later run against the first."""
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

    def comparison(self, other: int) -> BenchComparison | None:
        return next((c for c in self.comparisons if c.other == other), None)

    def carried(self) -> int:
        return sum(run.carried() for run in self.runs)

    def all_clear(self) -> bool:
        """Truly nothing to list: every trial of every run completed and every loop was graded (or carried)."""
        return all(not run.errors() for run in self.runs)
