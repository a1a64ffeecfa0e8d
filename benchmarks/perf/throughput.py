"""Throughput of `hoh bench run` with 1 and 2 local workers on agent-bound tasks, side by side.

Each synthetic task is a Harbor task whose scripted agent sleeps in every role (as a model-bound
CLI waits on its model), so the agent, not this machine's CPU, is the bottleneck: N workers
should finish N times as many trials per second. Prints trials/s for each worker count and the
ratio (target ≥ 1.8); exits 1 when the ratio misses the target.

    python benchmarks/perf/throughput.py [--tasks 6] [--sleep 1.0] [--target 1.8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hoh.bench.runner import bench_settings, run_bench
from hoh.config import HohConfig

TEST_SH = """#!/usr/bin/env bash
mkdir -p /logs/verifier
if [ "$(python3 /workspace/hello.py)" = hello ]; then reward=1; else reward=0; fi
echo "$reward" > /logs/verifier/reward.txt
"""


def script(sleep: float) -> dict:
    """One hoh loop; the Developer waits 2×sleep, the Planner and QA sleep each (a model's latency)."""
    return {"schema_version": 1, "loops": {1: {
        "planner": {"actions": [{"sleep": sleep}], "reply": {
            "goal": "hello", "preserve": [], "out_of_scope": [],
            "tasks": [{"id": "T1", "title": "hello.py", "details": "print hello", "issues": [],
                       "acceptance": [{"id": "T1.A1", "condition": "prints hello", "method": "black-box"}]}]}},
        "developer": {"actions": [{"sleep": 2 * sleep}, {"write": {"path": "hello.py", "content": "print('hello')\n"}}],
                      "reply": {"summary": "hello.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                "self_tests": [], "known_gaps": []}},
        "qa": {"actions": [{"sleep": sleep}],
               "checks": [{"id": "T1.A1", "run": "python3 hello.py", "expect_stdout": "hello"}]},
    }}}


def make_suite(root: Path, tasks: int, sleep: float) -> Path:
    for n in range(tasks):
        task = root / f"hello-{n:02d}"
        (task / "tests").mkdir(parents=True)
        (task / "scripted").mkdir()
        (task / "task.toml").write_text(f'[task]\nname = "perf/hello-{n:02d}"\n[verifier]\ntimeout_sec = 60.0\n')
        (task / "instruction.md").write_text("# hello\n\nWrite hello.py, which prints hello.\n")
        (task / "tests" / "test.sh").write_text(TEST_SH)
        (task / "scripted" / "script.yaml").write_text(yaml.safe_dump(script(sleep), sort_keys=False))
    return root


def measure(suite: Path, out: Path, jobs: int) -> tuple[float, int]:
    settings = bench_settings(str(suite), config=HohConfig(), mode="hoh", ablate=[], loops=1)
    start = time.monotonic()
    result = run_bench(settings, out, jobs=jobs)
    seconds = time.monotonic() - start
    done = sum(1 for r in result.records if r["outcome"] == "completed" and r["final_score"] == 1.0)
    if done != len(result.records):
        raise SystemExit(f"only {done}/{len(result.records)} trials completed with score 1.0; see {out}")
    return seconds, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6, help="trials per measurement")
    parser.add_argument("--sleep", type=float, default=1.0, help="agent latency unit, seconds")
    parser.add_argument("--target", type=float, default=1.8, help="required 2-worker/1-worker ratio")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hoh-perf-") as tmp:
        suite = make_suite(Path(tmp) / "suite", args.tasks, args.sleep)
        rates = {}
        for jobs in (1, 2):
            seconds, done = measure(suite, Path(tmp) / f"out-{jobs}", jobs)
            rates[jobs] = done / seconds
            print(f"workers={jobs}  trials={done}  seconds={seconds:.2f}  throughput={rates[jobs]:.3f} trials/s",
                  flush=True)
    ratio = rates[2] / rates[1]
    verdict = "meets" if ratio >= args.target else "MISSES"
    print(f"ratio 2/1 = {ratio:.2f} ({verdict} the target {args.target})")
    return 0 if ratio >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
