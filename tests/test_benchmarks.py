"""The perf benchmarks at their tiny size (throughput.py on Harbor and Docker): they run, and what they print are figures."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest
from conftest import REPO
from harbor_env import harbor  # noqa: F401

from hoh.evidence.checks import Expect

REPLAY = REPO / "benchmarks" / "perf" / "replay_overhead.py"


def test_the_replay_overhead_benchmark_prints_its_figures_for_each_size(tmp_path):
    result = subprocess.run([sys.executable, str(REPLAY), "--tiny", "--json"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOH_BENCH_TMP": str(tmp_path)},
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    sizes = json.loads(result.stdout)["sizes"]
    assert [(s["checks"], s["rounds"]) for s in sizes] == [(2, 1), (4, 1)]
    for s in sizes:
        for side in ("replay", "direct", "bwrap"):
            assert 0 < s[f"{side}_s"]["min"] <= s[f"{side}_s"]["median"]
            assert s["ms_per_check"][side]["median"] == pytest.approx(s[f"{side}_s"]["median"] / s["checks"] * 1000)
        assert s["ratio_replay_bwrap"]["median"] > 0
        assert s["register_load_ms"] > 0 and s["register_save_ms"] > 0 and s["register_bytes"] > 0
        # A difference of two noisy times: its sign is the machine's, but it is a number.
        assert math.isfinite(s["hoh_overhead_ms_per_check"]["median"])
    assert list(tmp_path.iterdir()) == []  # its temp dir honoured HOH_BENCH_TMP and is gone


def test_a_replay_that_does_not_pass_is_an_error_not_a_figure(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("replay_overhead", REPLAY)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "KINDS", [("cat data.txt", Expect(stdout="not what it prints"))])
    with pytest.raises(SystemExit, match="bwrap: `cat data.txt` did not pass: stdout does not match"):
        bench.main(["--checks", "1", "--rounds", "1"])
    monkeypatch.setattr(bench, "run_bare", lambda *args, **kwargs: None)  # only replay's own verdict left
    with pytest.raises(SystemExit, match="replay: not every check passed .* C-0001 failed: stdout does not match"):
        bench.main(["--checks", "1", "--rounds", "1"])
    assert capsys.readouterr().out == ""


EVIDENCE = REPO / "benchmarks" / "perf" / "evidence_scaling.py"


def test_the_evidence_scaling_benchmark_prints_its_figures(tmp_path):
    result = subprocess.run([sys.executable, str(EVIDENCE), "--tiny", "--json"], capture_output=True, text=True,
                            timeout=600, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOH_BENCH_TMP": str(tmp_path)},
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout)
    context, overhead = figures["context"], figures["overhead"]
    assert context["loops"] == 20 and context["issues"] > 0 and context["index_bytes"] <= context["index_budget"]
    assert set(context["prompt_bytes"]) == {"1", "2", "20"} and context["ratio_last_first"] > 0
    assert 0 < context["evidence_step_ms"]["min"] <= context["evidence_step_ms"]["median"] <= context["evidence_step_ms"]["max"]
    assert overhead["ledger_issues"]["none"] == 0 and overhead["ledger_issues"]["issues"] == 50
    for side in ("none", "issues", "long"):
        s = overhead["seconds"][side]
        assert math.isfinite(s["median"]) and s["min"] <= s["median"] <= s["max"]
    assert set(overhead["ratios"]) == {"issues/none", "long/none"}
    assert isinstance(figures["missed"], list)
    assert list(tmp_path.iterdir()) == []  # its temp dir honoured HOH_BENCH_TMP and is gone


def test_the_throughput_benchmark_runs(harbor, tmp_path):
    """benchmarks/perf/throughput.py, tiny: one task per measurement on Harbor and Docker, 1 and 2 trials at once."""
    result = subprocess.run([str(harbor.exe.parent / "python"), str(REPO / "benchmarks" / "perf" / "throughput.py"),
                             "--tiny"], capture_output=True, text=True, timeout=1800,
                            env={**harbor.env(), "HOH_BENCH_TMP": str(tmp_path)}, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    for variant in ("wait", "cpu"):
        assert f"{variant:4}  trials at once=1  tasks=1" in result.stdout and f"{variant:4}  ratio 2/1 = " in result.stdout
    assert list(tmp_path.iterdir()) == []
