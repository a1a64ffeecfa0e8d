"""Throughput of `hoh bench run` on Harbor with 1 and 2 trials at once, for two kinds of agent work.

Each synthetic task is a Harbor task (Docker, the examples' base image) that hoh's scripted agent
solves in one loop; every task is one Harbor agent trial (hoh's Planner → Developer → QA inside the
container) and one Harbor grading trial (the candidate replayed and verified). Two variants:

    wait  every role waits as a CLI waits on its model (the usual case: the agent, not this machine, is
          the bottleneck, so 2 trials at once should nearly double the rate)
    cpu   the Developer computes a fixed amount of work (a sha256 chain) and every role starts real
          Python processes: 2 trials at once can gain only what the machine's cores allow

Prints tasks/s for each variant and trial count, and the 2/1 ratios; exits 1 when the `wait` ratio
misses --target (the `cpu` ratio is reported as measured: it is bounded by the cores).

    python benchmarks/perf/throughput.py [--tasks 4] [--wait 3] [--work 4000000] [--target 1.6] [--tiny]

`--tiny` is the tests' smoke size (one task per measurement, short waits, little work; no target held).

Needs what the Harbor tests need: hoh[harbor] in this Python, a Docker engine at $DOCKER_HOST with
localhost/hoh-base:bookworm (`.ci/docker-engine base-image`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hoh.bench.runner import bench_settings, run_bench

BURN = ("python3 -c \"import hashlib,sys; h=b'x'\nfor _ in range(int(sys.argv[1])): h=hashlib.sha256(h).digest()\n"
        "print(h.hex()[:8])\" {work}")
TEST_SH = """#!/usr/bin/env bash
mkdir -p /logs/verifier
if [ "$(python3 /workspace/hello.py)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def script(variant: str, wait: float, work: int) -> dict:
    """One hoh loop: the roles wait (a model's latency) or the Developer computes (`work` sha256 rounds)."""
    pause = [{"sleep": wait}] if variant == "wait" else []
    compute = [{"run": BURN.format(work=work)}] if variant == "cpu" else []
    return {"schema_version": 1, "loops": {1: {
        "planner": {"actions": pause, "reply": {
            "goal": "hello", "preserve": [], "out_of_scope": [],
            "tasks": [{"id": "T1", "title": "hello.py", "details": "print hello", "issues": [],
                       "acceptance": [{"id": "T1.A1", "condition": "prints hello", "method": "black-box"}]}]}},
        "developer": {"actions": [*pause, *pause, *compute, {"write": {"path": "hello.py", "content": "print('hello')\n"}}],
                      "reply": {"summary": "hello.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                "self_tests": [], "known_gaps": []}},
        "qa": {"actions": pause, "checks": [{"id": "T1.A1", "run": "python3 hello.py", "expect_stdout": "hello"}]},
    }}}


def make_suite(root: Path, tasks: int, variant: str, wait: float, work: int) -> Path:
    for n in range(tasks):
        task = root / f"{variant}-{n:02d}"
        for sub in ("tests", "scripted", "environment"):
            (task / sub).mkdir(parents=True)
        (task / "task.toml").write_text(f'[task]\nname = "perf/{variant}-{n:02d}"\n[verifier]\ntimeout_sec = 120.0\n'
                                        '[agent]\ntimeout_sec = 900.0\n')
        (task / "instruction.md").write_text("# hello\n\nWrite hello.py, which prints hello.\n")
        (task / "environment" / "Dockerfile").write_text("FROM localhost/hoh-base:bookworm\nWORKDIR /workspace\n")
        (task / "tests" / "test.sh").write_text(TEST_SH)
        (task / "scripted" / "script.yaml").write_text(yaml.safe_dump(script(variant, wait, work), sort_keys=False))
    return root


def measure(suite: Path, out: Path, jobs: int) -> tuple[float, int]:
    settings = bench_settings(str(suite), env="docker", harness="scripted", loops=1)
    start = time.monotonic()
    result = run_bench(settings, out, jobs=jobs)
    seconds = time.monotonic() - start
    done = sum(1 for r in result.records if r["outcome"] == "completed" and r["final_score"] == 1.0)
    if done != len(result.records):
        raise SystemExit(f"only {done}/{len(result.records)} tasks completed with score 1.0; see {out}")
    return seconds, done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="tasks per measurement (each: 2 Harbor trials)")
    parser.add_argument("--wait", type=float, default=3.0, help="wait variant: a role's model latency, seconds")
    parser.add_argument("--work", type=int, default=4_000_000, help="cpu variant: sha256 rounds of the Developer")
    parser.add_argument("--target", type=float, default=1.6, help="required 2/1 ratio of the wait variant")
    parser.add_argument("--variants", default="wait,cpu")
    parser.add_argument("--tiny", action="store_true", help="the smoke size: --tasks 1 --wait 0.2 --work 10000, no target")
    args = parser.parse_args(argv)
    if args.tiny:
        args.tasks, args.wait, args.work, args.target = 1, 0.2, 10_000, 0.0
    os.environ.setdefault("HARBOR_TELEMETRY", "0")  # offline, its end-of-job event costs ~8 s of CPU per job
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ratios = {}
    with tempfile.TemporaryDirectory(prefix="hoh-perf-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp:
        for variant in args.variants.split(","):
            suite = make_suite(Path(tmp) / variant, args.tasks, variant, args.wait, args.work)
            rates = {}
            for jobs in (1, 2):
                seconds, done = measure(suite, Path(tmp) / f"out-{variant}-{jobs}", jobs)
                rates[jobs] = done / seconds
                print(f"{variant:4}  trials at once={jobs}  tasks={done}  seconds={seconds:.1f}  "
                      f"throughput={rates[jobs]:.4f} tasks/s ({2 * rates[jobs]:.4f} Harbor trials/s)", flush=True)
            ratios[variant] = rates[2] / rates[1]
            print(f"{variant:4}  ratio 2/1 = {ratios[variant]:.2f}", flush=True)
    if "wait" not in ratios:
        return 0
    verdict = "meets" if ratios["wait"] >= args.target else "MISSES"
    print(f"wait ratio {ratios['wait']:.2f} {verdict} the target {args.target}")
    return 0 if ratios["wait"] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
