"""Does a loop cost hoh as much with 2,000 issues in the ledger, or after 500 loops, as with none after 5?

Two parts.

1. The Planner's context (in process, through the real ledger rules): a 200-loop history with about
   2,000 issues (closed, reopened, regressions, verified behaviours) is synthesized, and the Planner's
   prompt size is printed at loops 1, 2 and 200 (target: loop 200 / loop 1 ≤ 1.2), with INDEX.md's size
   and the Runtime's evidence step at loop 200 as a run makes it (fold the loop's reports into the ledger
   it holds, save it, rebuild INDEX.md; median of `--repeat` loops).

2. hoh's own time per loop, from real `hoh resume` runs with the scripted agent: a loop's wall time minus
   its role attempts and its check steps (the replay and admission of checks: the project's own tests),
   all read from the journal (`RunHistory`). Three workspaces, synthesized by tests/long_run.py's
   `make_long_workspace` (its loops sealed and their tags in the project's .git, as hoh leaves them):
       none    5 loops, an empty ledger
       issues  5 loops, `--issues` issues (and a tenth as many behaviours) in the ledger
       long    `--history` loops, its own ledger (a few hundred issues)
   This machine is noisy and its load drifts, so the sides run side by side: `--rounds` rounds, each
   resuming every workspace for `--loops` loops in turn (the order rotating per round); per side and
   round, the median of its loops but the session's first (its caches are cold). Reported: min / median
   / max over the rounds of each side's figure and of the per-round ratios issues/none and long/none
   (targets: median ≤ 1.1).

    python benchmarks/perf/evidence_scaling.py [--issues 2000] [--history 500] [--rounds 3] [--loops 3]
                                               [--tiny] [--json]

Exits 1 when a target is missed (not with `--tiny`, the tests' smoke size, whose few loops hold no
target); the last line printed is a JSON object whose `missed` lists the misses.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).resolve().parent)]

from hoh.config import IndexConfig  # noqa: E402
from hoh.evidence.index import build_index  # noqa: E402
from hoh.evidence.ledger import Ledger  # noqa: E402
from hoh.fsutil import atomic_write_json, atomic_write_text, prune_empty_dirs  # noqa: E402
from hoh.paths import WorkspacePaths  # noqa: E402
from hoh.runtime.jobs import schema_text  # noqa: E402
from hoh.runtime.prompts import template  # noqa: E402
from one_file_loops import loop_script, overheads  # noqa: E402

EVIDENCE = [{"kind": "command", "ref": "python3 game.py --check", "detail": "exit 0"}]
TARGET_CONTEXT, TARGET_OVERHEAD = 1.2, 1.1


# ---- part 1: the Planner's context ---------------------------------------------------------------------------
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
    """A loop's plan, Developer report and QA report: three tasks (fixing the top active issues), five
    preserved behaviours, `per_loop` new findings."""
    active = ledger.ranked_active_issues(3)
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


def write_loop(paths: WorkspacePaths, t: int, plan: dict, qa: dict) -> None:
    lp = paths.loop(t)
    atomic_write_json(lp.plan, plan)
    atomic_write_json(lp.qa, qa)
    atomic_write_json(lp.candidate, candidate(t, qa["candidate_id"]))


def planner_prompt(paths: WorkspacePaths, spec: str, loop: int) -> str:
    index = paths.index.read_text() if paths.index.exists() else ""
    return template("planner").render(role="planner", attempt=1, loop=loop, spec=spec, index=index,
                                      index_path=paths.index, project_dir=paths.project,
                                      schema=schema_text("plan"), notes=[], developers=1)


def context(loops: int, per_loop: int, repeat: int, spec: str, tmp: Path) -> dict:
    cfg, rng = IndexConfig(), random.Random(7)
    root = tmp / "context"
    paths = WorkspacePaths(root)
    paths.state.mkdir(parents=True)
    ledger = Ledger()
    sizes = {1: len(planner_prompt(paths, spec, 1).encode())}
    for t in range(1, loops):
        plan, developer, qa = loop_reports(t, ledger, per_loop, rng)
        ledger.apply_loop(t, plan, developer, qa["candidate_id"], qa)
        if t > loops - cfg.recent_loops - 1 or t == 1:
            write_loop(paths, t, plan, qa)
        if t == 1:
            atomic_write_text(paths.index, build_index(paths, spec, ledger, t, cfg))
            sizes[2] = len(planner_prompt(paths, spec, 2).encode())
    ledger.save(paths.ledger)
    atomic_write_text(paths.index, build_index(paths, spec, ledger, loops - 1, cfg))
    sizes[loops] = len(planner_prompt(paths, spec, loops).encode())
    ledger_bytes, issues, counts = paths.ledger.stat().st_size, len(ledger.issues), ledger.counts()
    index_bytes = paths.index.stat().st_size

    # The evidence step of `repeat` loops from `loops` on, as the Runtime makes it: the ledger it holds
    # (`Ledger.load` of the file it saved), the loop folded in, saved, INDEX.md rebuilt.
    timings = []
    for t in range(loops, loops + repeat):
        plan, developer, qa = loop_reports(t, ledger, per_loop, rng)
        write_loop(paths, t, plan, qa)
        start = time.perf_counter()
        current = Ledger.load(paths.ledger)
        current.apply_loop(t, plan, developer, qa["candidate_id"], qa)
        current.data["applied_through"] = t
        current.save(paths.ledger)
        atomic_write_text(paths.index, build_index(paths, spec, current, t, cfg))
        current.counts(), current.progress(t)
        timings.append((time.perf_counter() - start) * 1000)
    return {"loops": loops, "issues": issues, "counts": counts, "behaviours": len(ledger.behaviours),
            "spec_bytes": len(spec.encode()), "index_budget": cfg.budget_bytes, "index_bytes": index_bytes,
            "ledger_bytes": ledger_bytes, "prompt_bytes": {str(k): v for k, v in sizes.items()},
            "ratio_last_first": sizes[loops] / sizes[1], "evidence_step_ms": spread(timings)}


# ---- part 2: hoh's own time per loop ---------------------------------------------------------------------
def fill_ledger(path: Path, issues: int, through: int) -> None:
    """A ledger of `issues` issues over loops 1..`through`, through the real rules: each loop opens its share,
    and fixes and verifies some of the open ones (closed, a tenth as many behaviours verified)."""
    ledger, rng = Ledger(), random.Random(11)
    per_loop = -(-issues // through)
    for t in range(1, through + 1):
        active = ledger.ranked_active_issues(per_loop // 5)
        tasks = [{"id": f"T{k}", "title": f"fix {issue['id']}", "details": "", "issues": [issue["id"]],
                  "acceptance": [{"id": f"T{k}.A1", "condition": f"behaviour {t}.{k} holds", "method": "black-box"}]}
                 for k, issue in enumerate(active[: per_loop // 10])]
        plan = {"schema_version": 1, "loop": t, "goal": f"increment {t}", "tasks": tasks, "preserve": [], "out_of_scope": []}
        new = min(per_loop, issues - len(ledger.issues))
        findings = [{"title": f"defect {t}.{k}: feature {k} misbehaves", "severity": rng.choice(["blocker", "major", "minor", "note"]),
                     "repro": "run it", "evidence": EVIDENCE} for k in range(new)]
        qa = {"schema_version": 1, "loop": t, "candidate_id": f"loop-{t:04d}-{t:012x}", "verdict": "partial",
              "criteria": [{"id": task["acceptance"][0]["id"], "status": "verified", "evidence": EVIDENCE} for task in tasks],
              "preserved": [], "findings": findings}
        ledger.apply_loop(t, plan, {"tasks": [{"id": task["id"], "status": "done", "notes": ""} for task in tasks]},
                          qa["candidate_id"], qa)
    ledger.data["applied_through"] = through
    ledger.save(path)


def git(*args: str, env: dict | None = None) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env={**os.environ, **(env or {})})


def as_hoh_leaves_it(ws: Path) -> None:
    """What a run of that many loops leaves that `make_long_workspace` does not make: each loop's role attempts
    (a prompt and a result per role: every later Planner's jail hides each loop's roles/), every finished loop
    sealed (`store/seal.py`, in one go) and the loop tags in the project's .git."""
    paths = WorkspacePaths(ws)
    for loop in paths.loops.iterdir():
        for role in ("planner", "developer", "qa"):
            attempt = loop / "roles" / role / "attempt-1"
            attempt.mkdir(parents=True, exist_ok=True)
            (attempt / "prompt.md").write_text(f"# {role} of {loop.name}\n")
            (attempt / "result.json").write_text('{"schema_version": 1, "ok": true}\n')
        prune_empty_dirs(loop)
    history = ["--git-dir", str(paths.history), "--work-tree", str(paths.state)]
    index = {"GIT_INDEX_FILE": str(paths.history / "state-index")}
    git(*history, "add", "--force", "--", "loops", env=index)
    tree = subprocess.run(["git", *history, "write-tree"], check=True, capture_output=True, text=True,
                          env={**os.environ, **index}).stdout.strip()
    git("--git-dir", str(paths.history), "update-ref", "refs/hoh/sealed", tree)
    git("--git-dir", str(paths.project / ".git"), "fetch", "-q", "--no-tags", str(paths.history),
        "+refs/tags/*:refs/tags/*")


def make_sides(tmp: Path, issues: int, history: int, extra: int) -> dict[str, Path]:
    from long_run import make_long_workspace
    sides = {}
    for name, loops in (("none", 5), ("issues", 5), ("long", history)):
        ws = make_long_workspace(tmp / name, loops=loops)
        paths = WorkspacePaths(ws)
        if name == "none":
            Ledger({"schema_version": 1, "applied_through": loops, "issues": [], "behaviours": []}).save(paths.ledger)
        elif name == "issues":
            fill_ledger(paths.ledger, issues, loops)
        as_hoh_leaves_it(ws)
        script = tmp / f"{name}.yaml"
        script.write_text(yaml.safe_dump(loop_script(loops + extra), sort_keys=False))
        sides[name] = ws
        config = yaml.safe_load((ws / "hoh.yaml").read_text())
        config["harness"].update(name="scripted", model=None, script=str(script))  # what `--set` would write
        (ws / "hoh.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return sides


def resume(ws: Path, loops: int) -> None:
    result = subprocess.run([sys.executable, "-m", "hoh", "resume", "-w", str(ws), "--loops", str(loops), "-q"],
                            capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"resume {ws.name} failed: {result.stderr[-2000:]}")



def side_by_side(sides: dict[str, Path], rounds: int, loops: int) -> dict[str, list[float]]:
    """Per side, per round: the median of hoh's own seconds in the session's loops but its first."""
    names, per_round = list(sides), {name: [] for name in sides}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            last = max(overheads(sides[name]))
            resume(sides[name], loops)
            over = overheads(sides[name])
            counted = [over[t] for t in range(last + 2, last + loops + 1)]
            if len(counted) != loops - 1:
                sys.exit(f"{name}: the resume of round {r + 1} did not finish its {loops} loops")
            per_round[name].append(statistics.median(counted))
    return per_round


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def overhead(issues: int, history: int, rounds: int, loops: int, tmp: Path) -> dict:
    sides = make_sides(tmp, issues, history, rounds * loops)
    per_round = side_by_side(sides, rounds, loops)
    ratios = {f"{name}/none": [x / y for x, y in zip(per_round[name], per_round["none"])] for name in ("issues", "long")}
    return {"issues": issues, "history": history, "rounds": rounds, "loops_per_round": loops,
            "ledger_issues": {name: len(Ledger.load(ws / "state" / "ledger.json").issues) for name, ws in sides.items()},
            "seconds": {name: spread(v) for name, v in per_round.items()},
            "ratios": {name: spread(v) for name, v in ratios.items()}}


def show(c: dict, o: dict) -> str:
    p, e = c["prompt_bytes"], c["evidence_step_ms"]
    n = c["loops"]
    lines = [f"history: {n} loops, {c['issues']} issues ({c['counts']['open']} open, {c['counts']['reopened']} reopened, "
             f"{c['counts']['closed']} closed), {c['behaviours']} behaviours; ledger {c['ledger_bytes'] // 1024} KiB",
             f"spec {c['spec_bytes']} bytes; INDEX.md at loop {n}: {c['index_bytes']} bytes (budget {c['index_budget']})",
             f"planner prompt bytes: loop 1 = {p['1']}, loop 2 = {p['2']}, loop {n} = {p[str(n)]}; "
             f"loop {n} / loop 1 = {c['ratio_last_first']:.3f} (target ≤ {TARGET_CONTEXT})",
             f"evidence step from loop {n} (fold, save, INDEX.md): min / median / max {e['min']:.1f} / "
             f"{e['median']:.1f} / {e['max']:.1f} ms",
             f"hoh's own time per loop ({o['rounds']} rounds of {o['loops_per_round']} loops each, min / median / max, s):"]
    labels = {"none": "5 loops, no issue", "issues": f"5 loops, {o['issues']} issues", "long": f"{o['history']} loops"}
    for name, s in o["seconds"].items():
        lines.append(f"  {labels[name]:<22} {s['min']:.3f} / {s['median']:.3f} / {s['max']:.3f}"
                     f"   ({o['ledger_issues'][name]} issues in its ledger)")
    for name, r in o["ratios"].items():
        lines.append(f"  ratio {name:<12} {r['min']:.2f} / {r['median']:.2f} / {r['max']:.2f} (target ≤ {TARGET_OVERHEAD})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--issues", type=int, default=2000, help="issues in the ledger of the `issues` side")
    p.add_argument("--history", type=int, default=500, help="loops of the `long` side")
    p.add_argument("--rounds", type=int, default=3, help="interleaved resume rounds")
    p.add_argument("--loops", type=int, default=3, help="loops per resume (the first of each is not counted)")
    p.add_argument("--context-loops", type=int, default=200)
    p.add_argument("--issues-per-loop", type=int, default=10)
    p.add_argument("--repeat", type=int, default=15, help="evidence steps timed")
    p.add_argument("--spec", type=Path, help="a spec file (default: a synthetic ~6 KB spec)")
    p.add_argument("--tiny", action="store_true", help="the smoke size: 50 issues, 12 loops, 1 round of 2 loops")
    p.add_argument("--json", action="store_true", help="print one JSON object with the figures instead")
    args = p.parse_args(argv)
    if args.tiny:
        args.issues, args.history, args.rounds, args.loops = 50, 12, 1, 2
        args.context_loops, args.issues_per_loop, args.repeat = 20, 2, 3
    if args.loops < 2 or args.rounds < 1 or args.context_loops < 3 or args.history <= 5:
        p.error("--loops needs ≥ 2, --rounds ≥ 1, --context-loops ≥ 3, --history > 5")
    spec = args.spec.read_text() if args.spec else synthetic_spec(6000)
    with tempfile.TemporaryDirectory(prefix="hoh-evidence-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        c = context(args.context_loops, args.issues_per_loop, args.repeat, spec, tmp)
        shutil.rmtree(tmp / "context")
        o = overhead(args.issues, args.history, args.rounds, args.loops, tmp)
    missed = [f"planner prompt loop {c['loops']} / loop 1 = {c['ratio_last_first']:.2f} > {TARGET_CONTEXT}"
              ] if c["ratio_last_first"] > TARGET_CONTEXT else []
    missed += [f"overhead {name} = {r['median']:.2f} > {TARGET_OVERHEAD}" for name, r in o["ratios"].items()
               if r["median"] > TARGET_OVERHEAD]
    if args.json:
        print(json.dumps({"context": c, "overhead": o, "missed": missed}))
    else:
        print(show(c, o))
        print(json.dumps({"missed": missed}))
    return 1 if missed and not args.tiny else 0


if __name__ == "__main__":
    sys.exit(main())
