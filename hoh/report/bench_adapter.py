"""A `hoh bench run` OUT directory (Harbor's job dirs and hoh bench's settings) → the report's
`BenchRun`: the one function to rewire when the results move."""

from __future__ import annotations

from pathlib import Path

from ..bench.report import PASS_THRESHOLD
from ..bench.results import load_run
from ..bench.records import records_of
from .bench_model import BenchRun, BenchTrial


def run_from_results(out: Path) -> BenchRun:
    """Read OUT's settings and its tasks' records (UsageError: not a run; StateError: a corrupt file)."""
    paths, settings = load_run(Path(out))
    records, invalid = records_of(paths, settings)
    loops = max([settings.loops] + [len(r["scores"]) for r in records])
    trials = [BenchTrial(task=r["task"], outcome=r["outcome"],
                         scores=[r["scores"][min(k, len(r["scores"])) - 1] if r["scores"] else None
                                 for k in range(1, loops + 1)],
                         tokens=r.get("tokens"), cost_usd=r.get("cost_usd"), wall_seconds=r.get("wall_seconds"),
                         error=r.get("error")) for r in records]
    trials += [BenchTrial(task=bad["task"], outcome="invalid", scores=[None] * loops, error=bad["reason"])
               for bad in invalid]
    return BenchRun(label=settings.label(), harness=settings.harness, model=settings.model, mode=settings.mode,
                    ablate=list(settings.ablate), loops=loops, source=str(paths.root), trials=trials,
                    pass_threshold=PASS_THRESHOLD)
