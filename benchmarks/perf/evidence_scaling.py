"""Does loop 200 cost the Planner about as much context as loop 1?

Synthesizes a 200-loop history with 2,000 issues (closed, reopened, regressions, verified
behaviours) through the real ledger rules, then prints the Planner's prompt size at loops 1, 2
and 200 (target: loop 200 / loop 1 ≤ 1.2) and the time the Runtime's evidence step takes at loop
200: load the ledger, fold in the loop's reports, save it, rebuild INDEX.md (target ≤ 100 ms).

    python benchmarks/perf/evidence_scaling.py [--loops 200] [--issues-per-loop 10] [--spec FILE]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from hoh.config import IndexConfig
from hoh.evidence.index import build_index
from hoh.evidence.ledger import Ledger
from hoh.fsutil import atomic_write_json, atomic_write_text
from hoh.paths import WorkspacePaths
from hoh.runtime.jobs import schema_text
from hoh.runtime.prompts import template

EVIDENCE = [{"kind": "command", "ref": "python3 game.py --check", "detail": "exit 0"}]


def synthetic_spec(size: int) -> str:
    """A spec about as long as a GameCraft-Bench instruction (~6 KB)."""
    parts = ["# Game: Spire of Numbers\n\nA turn-based deck-building game playable in the browser.\n"]
    n = 0
    while sum(map(len, parts)) < size:
        n += 1
        parts.append(f"\n## Feature {n}\n\n" + "The player can perform a clearly specified action with visible "
                     "feedback, and the game state updates consistently across turns. " * 3 + "\n")
    return "".join(parts)


def loop_reports(t: int, ledger: Ledger, per_loop: int, rng: random.Random):
    active = ledger.ranked_active_issues()[:3]
    verified = ledger.verified_behaviours()
    preserve = rng.sample(verified, min(5, len(verified)))
    tasks = [{"id": f"T{k}", "title": f"work item {t}.{k}", "details": "", "issues": [],
              "acceptance": [{"id": f"T{k}.A1", "condition": f"behaviour {t}.{k} is observable", "method": "black-box"}]}
             for k in range(3)]
    for k, issue in enumerate(active):
        tasks[k]["issues"] = [issue["id"]]
    plan = {"schema_version": 1, "loop": t, "goal": f"increment {t}", "tasks": tasks,
            "preserve": [{"id": b["id"], "behaviour": b["behaviour"]} for b in preserve], "out_of_scope": []}
    criteria = [{"id": task["acceptance"][0]["id"], "status": rng.choice(["verified"] * 4 + ["failed"]),
                 "evidence": EVIDENCE} for task in tasks]
    preserved = [{"id": b["id"], "status": "failed" if rng.random() < 0.1 else "verified", "evidence": EVIDENCE}
                 for b in preserve]
    findings = [{"title": f"defect {t}.{k}: something is off in feature {k}", "severity": rng.choice(
        ["blocker", "major", "minor", "note"]), "repro": "run it", "evidence": EVIDENCE} for k in range(per_loop)]
    qa = {"schema_version": 1, "loop": t, "candidate_id": f"loop-{t:04d}-{t:012x}", "verdict": "partial",
          "criteria": criteria, "preserved": preserved, "findings": findings}
    developer = {"tasks": [{"id": task["id"], "status": "done", "notes": ""} for task in tasks]}
    return plan, developer, qa


def candidate(t: int, candidate_id: str) -> dict:
    return {"schema_version": 1, "loop": t, "candidate_id": candidate_id, "commit": "0" * 40, "tree": "0" * 40,
            "parent": "0" * 40, "tag": f"loop-{t:04d}"}


def planner_prompt(paths: WorkspacePaths, spec: str, loop: int) -> str:
    index = paths.index.read_text() if paths.index.exists() else ""
    return template("planner").render(role="planner", attempt=1, loop=loop, spec=spec, index=index, index_path=paths.index,
                                      project_dir=paths.project, schema=schema_text("plan"), notes=[])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--issues-per-loop", type=int, default=10)
    parser.add_argument("--spec", type=Path, help="a spec file (default: a synthetic ~6 KB spec)")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    spec = args.spec.read_text() if args.spec else synthetic_spec(6000)
    cfg = IndexConfig()
    rng = random.Random(7)
    root = Path(tempfile.mkdtemp(prefix="hoh-bench-"))
    try:
        paths = WorkspacePaths(root)
        (root / "state").mkdir()
        ledger = Ledger()
        sizes = {1: len(planner_prompt(paths, spec, 1).encode())}
        last = args.loops
        for t in range(1, last):
            plan, developer, qa = loop_reports(t, ledger, args.issues_per_loop, rng)
            ledger.apply_loop(t, plan, developer, qa["candidate_id"], qa)
            if t > last - cfg.recent_loops - 1:
                lp = paths.loop(t)
                atomic_write_json(lp.plan, plan)
                atomic_write_json(lp.qa, qa)
                atomic_write_json(lp.candidate, candidate(t, qa["candidate_id"]))
            if t == 1:
                atomic_write_text(paths.index, build_index(paths, spec, ledger, t, cfg))
                sizes[2] = len(planner_prompt(paths, spec, 2).encode())
        ledger.save(paths.ledger)
        atomic_write_text(paths.index, build_index(paths, spec, ledger, last - 1, cfg))
        sizes[last] = len(planner_prompt(paths, spec, last).encode())

        # The evidence step at loop `last`, timed from a fresh copy of the ledger each time.
        plan, developer, qa = loop_reports(last, ledger, args.issues_per_loop, rng)
        saved = paths.ledger.read_bytes()
        timings = []
        for _ in range(args.repeat):
            paths.ledger.write_bytes(saved)
            start = time.perf_counter()
            current = Ledger.load(paths.ledger)
            current.apply_loop(last, plan, developer, qa["candidate_id"], qa)
            current.save(paths.ledger)
            atomic_write_text(paths.index, build_index(paths, spec, current, last, cfg))
            timings.append((time.perf_counter() - start) * 1000)
        counts = current.counts()
        reopened_ever = sum(1 for i in current.issues if i["regressions"])

        print(f"history: {last} loops, {len(current.issues)} issues ({counts['open']} open, {counts['reopened']} reopened, "
              f"{counts['closed']} closed, {reopened_ever} ever reopened), {len(current.behaviours)} behaviours")
        print(f"spec: {len(spec.encode())} bytes; index budget: {cfg.budget_bytes} bytes; "
              f"index at loop {last}: {paths.index.stat().st_size} bytes; ledger: {len(saved) // 1024} KiB")
        print(f"planner prompt bytes: loop 1 = {sizes[1]}, loop 2 = {sizes[2]}, loop {last} = {sizes[last]}")
        print(f"ratio loop {last} / loop 1 = {sizes[last] / sizes[1]:.3f} (target <= 1.2); "
              f"loop {last} / loop 2 = {sizes[last] / sizes[2]:.3f}")
        print(f"evidence step at loop {last} (load + update + save ledger, rebuild index): "
              f"median {statistics.median(timings):.1f} ms, max {max(timings):.1f} ms over {args.repeat} runs "
              f"(target <= 100 ms)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
