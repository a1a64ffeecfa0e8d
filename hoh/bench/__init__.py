"""The benchmark runner on Harbor (DESIGN.md §6): per task, hoh as a Harbor agent, then every loop's
candidate graded by the task's own Harbor verifier (HoH@1..@T); modes, ablations, reports.

    settings.py      BenchSettings: suite, environment, harness or Harbor's oracle, mode, ablations, T
    suite.py         the suite's tasks through Harbor's task model; Harbor's preflight of env and agent
    jobs.py          one Harbor job: its JobConfig file, `harbor run -c`, stopping it on Ctrl-C
    runner.py        a whole run: checks → OUT → per task a calibration, an agent and a grade job → summary
    results.py       the OUT directory and reading Harbor's trial results (no Harbor import)
    calibrate.py     the task's reference solution graded here: gradable, or not gradable here and why
    causes.py        the line of an error (or a verifier's log) that says why
    records.py       one record per task: each loop's state and grade, rewards per key, errors, tokens
    report.py        summaries, Markdown, comparisons, pairwise win rates and Dominance
    programbench.py  ProgramBench through its package: instances → Harbor tasks, graded by the package
    listing.py       `hoh bench list`

The grading trials use `hoh.harbor:CandidateAgent`, which replays one loop's recorded candidate
into a fresh environment of the task. Nothing here prints; `hoh/cli/bench.py` renders.
"""
