"""What `hoh report` and `hoh view` cost at a short run and at a long one: the cost must not grow with the run.

Method. Two generated workspaces (`tests/long_run.py`: the Runtime's own state formats, a real git
history) of 50 and 500 loops. In interleaved rounds (the order of the sizes rotating per round):

    report cold   `hoh report -w WS -o DIR/report.html` into an empty DIR: every loop's page is written
    report again  the same command once more, the newest loop's page removed first (a loop finished since):
                  what a report re-made during a run costs; sealed loops' pages are kept, not rewritten
    view first    a fresh app (empty cache), one GET of each main page: the run, the ledger, the newest loop
    view moved    the same pages after the journal's stamp moved (its mtime set forward): every cached read
                  keyed on the run's stamp is stale, as on every poll of a live run (the view keeps the
                  journal's fold and folds only lines appended since: `view/follow.py`)

Each figure is the child's CPU (user + system, from wait4) and wall time for the report, the app's
process CPU and wall time for the view, as min / median / max over the rounds; and the size of the
report's main page and of everything it wrote. Target: at 500 loops ≤ 2× the 50-loop CPU time for
`report again` and `view moved`, the steady state of a long run, and for the size of the report's main
page; the other figures are printed. (CPU, not
wall: the machines this runs on are shared, and wall time there is mostly waiting for a core.)

    python benchmarks/perf/report_scaling.py [--loops 50,500] [--rounds 3] [--target 2.0] [--tiny]

Prints one line per figure, then one JSON line: {"figures": ..., "missed": [...]}; exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from long_run import make_long_workspace  # noqa: E402

PAGES = ("run", "ledger", "loop")


def spread(samples: list[float]) -> dict[str, float]:
    return {"min": round(min(samples), 4), "median": round(statistics.median(samples), 4),
            "max": round(max(samples), 4)}


def report_once(ws: Path, out: Path) -> tuple[float, float]:
    """One `hoh report` child: (CPU seconds, wall seconds)."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "hoh", "report", "-w", str(ws), "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode != 0:
        sys.exit(f"hoh report -w {ws} failed ({child.returncode}): {err.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


def written(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def newest_loop_page(out: Path, loops: int) -> Path | None:
    """The newest loop's own page, wherever this report's layout keeps it (None: a one-file report)."""
    found = sorted(p for p in out.parent.rglob(f"{loops:04d}.html"))
    return found[0] if found else None


def view_once(ws: Path, loops: int, moved: bool) -> tuple[float, float]:
    """GET the view's main pages, from a fresh app; with `moved`, once more after the journal's stamp moved
    (the second pass is the one timed). (CPU seconds, wall seconds)."""
    from starlette.testclient import TestClient

    from hoh.view.app import create_app

    client = TestClient(create_app([ws]), base_url="http://127.0.0.1")
    urls = ["/w/0/", "/w/0/ledger", f"/w/0/loop/{loops}"]

    def get_all() -> tuple[float, float]:
        cpu, start = time.process_time(), time.perf_counter()
        for url in urls:
            response = client.get(url)
            if response.status_code != 200 or 'id="trouble"' in response.text:
                sys.exit(f"hoh view: GET {url} of {ws} answered {response.status_code}")
        return time.process_time() - cpu, time.perf_counter() - start

    first = get_all()
    if not moved:
        return first
    journal = ws / "state" / "journal.jsonl"
    st = journal.stat()
    os.utime(journal, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    return get_all()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loops", default="50,500", help="the short and the long run's loops")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", type=float, default=2.0, help="long / short at most")
    p.add_argument("--tiny", action="store_true", help="3 and 6 loops, one round: the tests' run")
    args = p.parse_args(argv)
    sizes = [3, 6] if args.tiny else [int(n) for n in args.loops.split(",")]
    rounds = 1 if args.tiny else args.rounds
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hoh-report-scaling-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        made = {n: make_long_workspace(tmp / f"ws{n}", loops=n) for n in sizes}
        samples: dict[int, dict[str, list[tuple[float, float]]]] = {n: {} for n in sizes}
        bytes_: dict[int, dict[str, int]] = {}
        for r in range(rounds):
            order = sizes[r % len(sizes):] + sizes[:r % len(sizes)]
            for n in order:
                out_dir = tmp / f"out{n}"
                shutil.rmtree(out_dir, ignore_errors=True)
                out_dir.mkdir()
                out = out_dir / "report.html"
                samples[n].setdefault("report_cold", []).append(report_once(made[n], out))
                bytes_[n] = {"main_page": out.stat().st_size, "all_files": written(out_dir)}
                page = newest_loop_page(out, n)
                if page is not None:
                    page.unlink()
                samples[n].setdefault("report_again", []).append(report_once(made[n], out))
                samples[n].setdefault("view_first", []).append(view_once(made[n], n, moved=False))
                samples[n].setdefault("view_moved", []).append(view_once(made[n], n, moved=True))
    for n in sizes:
        figures[str(n)] = {"loops": n, "rounds": rounds, **bytes_[n]}
        for name, pairs in samples[n].items():
            figures[str(n)][name] = {"cpu_s": spread([c for c, _ in pairs]), "wall_s": spread([w for _, w in pairs])}
        f = figures[str(n)]
        print(f"{n:>4} loops: main page {f['main_page']:,} bytes, all files {f['all_files']:,} bytes")
        for name in samples[n]:
            cpu, wall = f[name]["cpu_s"], f[name]["wall_s"]
            print(f"{'':>11}{name:<13} CPU {cpu['min']:.3f} / {cpu['median']:.3f} / {cpu['max']:.3f} s · "
                  f"wall {wall['min']:.3f} / {wall['median']:.3f} / {wall['max']:.3f} s (min / median / max)")
    short, long = str(sizes[0]), str(sizes[-1])
    misses = []
    for name, kind in (("report_cold", "cpu_s"), ("report_again", "cpu_s"), ("view_first", "cpu_s"),
                       ("view_moved", "cpu_s")):
        ratio = figures[long][name][kind]["median"] / max(figures[short][name][kind]["median"], 1e-9)
        figures[f"ratio_{name}"] = round(ratio, 3)
        targeted = name in ("report_again", "view_moved")
        print(f"{name} {long}/{short} loops: {ratio:.2f}" + (f" (target ≤ {args.target})" if targeted else ""))
        if targeted and ratio > args.target and not args.tiny:
            misses.append(f"{name} {long}/{short} loops {ratio:.2f} > {args.target}")
    ratio = figures[long]["main_page"] / figures[short]["main_page"]
    figures["ratio_main_page"] = round(ratio, 3)
    print(f"main page size {long}/{short} loops: {ratio:.2f} (target ≤ {args.target})")
    if ratio > args.target and not args.tiny:
        misses.append(f"main page {long}/{short} loops {ratio:.2f} > {args.target}")
    print(json.dumps({"figures": figures, "missed": misses}))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
