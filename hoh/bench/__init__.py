"""The benchmark runner: many hoh builds, one per task, graded after every loop (DESIGN.md §6).

    tasks.py         the Task type and `load_suite` (a Harbor dir, a dir of them, or `programbench`)
    harbor.py        the Harbor task-directory loader (task.toml, instruction.md, tests/, solution/)
    programbench.py  ProgramBench through its own package: task list, submission packaging, grading
    verifier.py      grading a frozen candidate: Harbor's tests/test.sh in a bubblewrap view, rewards
    modes.py         hoh | vanilla | continuation and the --ablate switches → a hoh config per trial
    trial.py         one task → one hoh run under OUT, graded loop by loop (HoH@1..@T), resumable
    executors.py     the executor contract, its registry and the local (N workers) executor
    ray_executor.py  the same on a Ray cluster (ray imported only when chosen)
    results.py       the OUT directory: run.json (settings a rerun must match), trial records
    report.py        summaries (mean score per loop, pass rate, tokens), Markdown, --compare
    runner.py        a whole run: suite → trials to (re)run → executor → records and summary

Arrows point down only: cli → runner → {trial, executors} → {verifier, tasks} → hoh.api. Nothing
here prints; `hoh/cli/bench.py` renders.
"""
