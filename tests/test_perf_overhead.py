"""The runtime-overhead benchmark at its tiny size: it runs, prints its figures, and exits by its targets;
a failure of what it measures is an error (exit 2), never a figure."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import REPO

BENCH = REPO / "benchmarks" / "perf" / "runtime_overhead.py"


def _load():
    spec = importlib.util.spec_from_file_location("runtime_overhead", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_overhead_benchmark_prints_its_figures_and_exits_by_its_targets(tmp_path):
    result = subprocess.run([sys.executable, str(BENCH), "--tiny"], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOH_BENCH_TMP": str(tmp_path)},
                            stdin=subprocess.DEVNULL)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert figures["files"] == 300
    for side in ("hoh_n_s", "hoh_2n_s", "floor_n_s"):
        s = figures[side]
        assert 0 < s["min"] <= s["median"] <= s["max"] and s["n"] >= 1
    assert figures["ratio_2n_n"] == pytest.approx(figures["hoh_2n_s"]["median"] / figures["hoh_n_s"]["median"], rel=0.01)
    assert figures["ratio_n_floor"] == pytest.approx(figures["hoh_n_s"]["median"] / figures["floor_n_s"]["median"],
                                                     rel=0.01)
    assert figures["peak_rss_mb"] > 0
    # The exit code says whether the targets held, and the printed misses say which did not.
    assert (result.returncode == 1) == bool(figures["missed"])
    assert any("physical floor" in line for line in lines) and any("2N/N ratio" in line for line in lines)
    assert list(tmp_path.iterdir()) == []  # its temp dir honoured HOH_BENCH_TMP and is gone


def test_a_failed_build_is_an_error_not_a_figure(monkeypatch, capsys, tmp_path):
    bench = _load()
    monkeypatch.setenv("HOH_BENCH_TMP", str(tmp_path))
    monkeypatch.setattr(bench, "hoh", lambda *args, **kwargs: subprocess.CompletedProcess(args, 3, "", "boom"))
    assert bench.main(["--tiny"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "build n300 failed (exit 3): boom" in out.err
