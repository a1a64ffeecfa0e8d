"""The perf benchmarks that need no Docker, at their tiny size: they run, and what they print are figures."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest
from conftest import REPO

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
