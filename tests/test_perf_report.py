"""benchmarks/perf/report_scaling.py at its tiny size: it runs, and what it prints are figures."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

SCALING = REPO / "benchmarks" / "perf" / "report_scaling.py"


def test_the_report_scaling_benchmark_prints_its_figures(tmp_path):
    result = subprocess.run([sys.executable, str(SCALING), "--tiny"], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOH_BENCH_TMP": str(tmp_path)},
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    out = json.loads(lines[-1])
    assert out["missed"] == []
    figures = out["figures"]
    for n in ("3", "6"):
        f = figures[n]
        assert f["loops"] == int(n) and f["rounds"] == 1
        assert 0 < f["main_page"] <= f["all_files"]
        for name in ("report_cold", "report_again", "view_first", "view_moved"):
            for kind in ("cpu_s", "wall_s"):
                assert 0 < f[name][kind]["min"] <= f[name][kind]["median"] <= f[name][kind]["max"], (n, name, kind)
        assert any(line.startswith(f"{int(n):>4} loops: main page {f['main_page']:,} bytes") for line in lines)
    for name in ("report_cold", "report_again", "view_first", "view_moved"):
        assert figures[f"ratio_{name}"] > 0
        assert any(line.startswith(f"{name} 6/3 loops: ") for line in lines)
    assert figures["ratio_main_page"] > 0 and any(line.startswith("main page size 6/3 loops: ") for line in lines)
    assert list(tmp_path.iterdir()) == []  # its temp dir honoured HOH_BENCH_TMP and is gone
