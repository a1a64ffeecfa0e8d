"""A loop's wall time with K = 1, 2 and 4 Developers working at once (`--developers K`, issue 27).

Method. One scripted project (the scripted harness, no model): the spec asks for N equal units of work, each a
file written after a fixed sleep of S seconds, so a unit takes the same time whoever builds it. With K = 1 the
Planner plans the N tasks for one Developer (N x S of work); with K = 2 or 4 it groups them into K equal work
packages of N/K tasks, one Developer each, and hoh merges them before QA checks every file. Each build is one
`hoh build` child process; its loop's wall time is read from its journal (`hoh status --json`: the loop's
seconds, Planner, Developers, merge, freeze and QA together). The K runs go side by side in interleaved rounds
(the order rotating per round), reported as min / median / max, and the ratios K/1 of the medians; the target
is checked on them:

- the K = 2 / K = 1 ratio ≤ 0.6 (two equal packages: ideally 0.5 plus the Planner's and QA's fixed time).

    python benchmarks/perf/parallel_developers.py [--units 4] [--seconds 4] [--rounds 3] [--ks 1,2,4] [--tiny]
                                                  [--json]

Prints the figures (or, with --json, one JSON object), then exits 1 when the target is missed (never with
--tiny, whose units are too short for the ratio to mean anything: it is the tests' smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

TARGET_RATIO_2 = 0.6
DEVELOPERS = (1, 2, 4)


def script(units: int, seconds: float, k: int) -> dict:
    """One loop: N tasks, each a file after `seconds` of work; with k > 1, k equal packages of them."""
    tasks = [{"id": f"T{n}", "title": f"unit {n}", "details": f"write unit{n}.txt", "issues": [],
              "acceptance": [{"id": f"T{n}.A1", "condition": f"unit{n}.txt holds {n}", "method": "black-box"}]}
             for n in range(1, units + 1)]

    def developer(numbers: list[int]) -> dict:
        actions = [a for n in numbers for a in ({"sleep": seconds},
                                                {"write": {"path": f"unit{n}.txt", "content": f"{n}\n"}})]
        return {"actions": actions,
                "reply": {"summary": f"wrote {len(numbers)} units", "self_tests": [], "known_gaps": [],
                          "tasks": [{"id": f"T{n}", "status": "done", "notes": ""} for n in numbers]}}

    plan = {"goal": f"{units} units of work", "tasks": tasks, "preserve": [], "out_of_scope": []}
    loop: dict = {"planner": {"reply": plan},
                  "qa": {"checks": [{"id": f"T{n}.A1", "run": f"cat unit{n}.txt", "expect_stdout": str(n)}
                                    for n in range(1, units + 1)]}}
    if k == 1:
        loop["developer"] = developer(list(range(1, units + 1)))
    else:
        share = units // k
        groups = [list(range(i * share + 1, (i + 1) * share + 1)) for i in range(k)]
        plan["packages"] = [{"id": f"P{i + 1}", "tasks": [f"T{n}" for n in g], "owns": [f"unit{n}.txt" for n in g]}
                            for i, g in enumerate(groups)]
        for i, g in enumerate(groups):
            loop[f"developer@P{i + 1}"] = developer(g)
    return {"schema_version": 1, "loops": {1: loop}}


def loop_seconds(root: Path, units: int, seconds: float, k: int, run: int) -> float:
    """Build the project once with K Developers; its loop's wall time, from the journal."""
    src = root / f"k{k}-{run}"
    src.mkdir()
    (src / "spec.md").write_text(f"# Units\n\n{units} equal units of work, each a file.\n")
    (src / "script.yaml").write_text(yaml.safe_dump(script(units, seconds, k), sort_keys=False))
    ws = src / "ws"
    env = {**os.environ, "HOME": str(src)}
    built = subprocess.run([sys.executable, "-m", "hoh", "build", str(src / "spec.md"), "--harness", "scripted",
                            "--developers", str(k), "--loops", "1", "-w", str(ws), "-q"], capture_output=True,
                           text=True, env=env, stdin=subprocess.DEVNULL)
    if built.returncode != 0:
        sys.exit(f"the build with {k} Developer(s) failed: {built.stderr.strip()[-500:]}")
    status = subprocess.run([sys.executable, "-m", "hoh", "status", "-w", str(ws), "--json"], capture_output=True,
                            text=True, env=env, stdin=subprocess.DEVNULL)
    loop = json.loads(status.stdout)["loops"][0]
    if loop["status"] != "pass":
        sys.exit(f"the build with {k} Developer(s) did not pass QA ({loop['status']}): not a figure")
    return float(loop["seconds"])


def spread(samples: list[float]) -> dict[str, float]:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--units", type=int, default=4, help="units of work (a multiple of 4)")
    p.add_argument("--seconds", type=float, default=4.0, help="each unit's fixed time")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--ks", default="1,2,4", help="the Developers at once to measure, comma-separated (1 and 2 among them)")
    p.add_argument("--tiny", action="store_true", help="the smoke size: 4 units of 0.1 s, one round, no target")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args(argv)
    units, seconds, rounds = (4, 0.1, 1) if args.tiny else (args.units, args.seconds, args.rounds)
    ks = tuple(sorted({int(k) for k in args.ks.split(",")}))
    if units < 4 or units % 4 or seconds <= 0 or rounds < 1 or not {1, 2} <= set(ks) <= set(DEVELOPERS):
        p.error("--units must be a positive multiple of 4, --seconds > 0, --rounds ≥ 1, --ks among 1,2,4 with 1 and 2")
    samples: dict[int, list[float]] = {k: [] for k in ks}
    with tempfile.TemporaryDirectory(prefix="hoh-parallel-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp:
        for r in range(rounds):
            order = ks[r % len(ks):] + ks[:r % len(ks)]
            for k in order:
                samples[k].append(loop_seconds(Path(tmp), units, seconds, k, r))
    figures = {str(k): spread(samples[k]) for k in ks}
    ratios = {f"{k}/1": figures[str(k)]["median"] / figures["1"]["median"] for k in ks[1:]}
    missed = [] if args.tiny or ratios["2/1"] <= TARGET_RATIO_2 else [f"2/1 ratio {ratios['2/1']:.2f} > {TARGET_RATIO_2}"]
    result = {"units": units, "unit_seconds": seconds, "rounds": rounds, "loop_seconds": figures, "ratios": ratios,
              "target_ratio_2": TARGET_RATIO_2, "missed": missed}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{units} units of {seconds:g} s of work, {rounds} interleaved round(s); loop wall time (s):")
        print(f"  {'K':>2}  {'min':>7}  {'median':>7}  {'max':>7}  {'K/1':>5}")
        for k in ks:
            f = figures[str(k)]
            ratio = f"{ratios[f'{k}/1']:.2f}" if k > 1 else "1.00"
            print(f"  {k:>2}  {f['min']:7.2f}  {f['median']:7.2f}  {f['max']:7.2f}  {ratio:>5}")
        print(json.dumps({"missed": missed, "ratios": ratios}))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
