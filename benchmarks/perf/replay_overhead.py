"""The cost per loop of replaying the check register (`hoh/runtime/replay.py`) on a frozen candidate.

Method. For each register size N, a small project (a Python script, a text file, a JSON config) is the
candidate's view, and N cheap checks (`cat`, `printf`, `grep`: the commands' own cost stays small) cycle
through the four matches: exact, normalized, regex, json_subset. Three sides run the same N commands:

    replay  hoh's `replay()` of the whole register, in the jail QA's checks get (LOCAL executor, bwrap)
    direct  the floor: `subprocess.run(["bash", "-c", cmd])`, no jail, no bookkeeping
    bwrap   the same commands under bare bwrap, with the argv hoh's executor builds (`bwrap_argv`)

so replay - bwrap is hoh's own bookkeeping (temp dirs, evidence files, the choke point's threads) and
bwrap - direct is the jail's. This machine is noisy, so the sides run side by side in interleaved rounds
(the order rotating per round), and each per-check figure and the replay/bwrap ratio is taken per round,
then reported as min and median over the rounds. Also the register's load + save time at N, with every
check's history full (20 replays), as the evidence step finds it after 20 loops.

    python benchmarks/perf/replay_overhead.py [--checks 10,100,500] [--rounds 3] [--tiny] [--json]

Exits 1 when a side's run does not show what its check expects (a benchmark that computes nothing is an
error, never a figure).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from hoh.envs.local.executor import LOCAL  # noqa: E402
from hoh.envs.local.jail import bwrap_argv  # noqa: E402
from hoh.evidence.checks import CheckRegister, CheckSpec, Expect, Match, RunStatus, mismatch  # noqa: E402
from hoh.harness.attempt import HOH_PACKAGE  # noqa: E402
from hoh.harness.sandbox import JailSpec, Limits, Network  # noqa: E402
from hoh.runtime.replay import CheckRunner, replay  # noqa: E402

PROJECT = {
    "app.py": "import json, sys\n\ndef main() -> None:\n    print(json.dumps({'name': 'demo', 'args': sys.argv[1:]}))\n",
    "data.txt": "alpha 1\nbeta 2\ngamma 3\n",
    "config.json": '{"name": "demo", "version": "1.2.3", "tags": ["a", "b"], "debug": false}\n',
}
# One check per match kind, cycled; each is a cheap command over the project's files.
KINDS: list[tuple[str, Expect]] = [
    ("cat data.txt", Expect(stdout=PROJECT["data.txt"])),
    ("printf '  alpha   1\\n beta 2  gamma\\t3 '", Expect(stdout="alpha 1 beta 2 gamma 3", match=Match.normalized)),
    ("grep -c def app.py; printf 'version %s\\n' 1.2.3", Expect(stdout=r"^version \d+\.\d+\.\d+$", match=Match.regex)),
    ("cat config.json", Expect(stdout='{"name": "demo", "tags": ["b"], "debug": false}', match=Match.json_subset)),
]
# What CheckRunner gives every check (replay.py): the bare sides get the same, so only the wrapping differs.
ENV = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/tmp", "TMPDIR": "/tmp",
       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
JAIL = JailSpec(read_only=(), tmp_bytes=64 * 2**20)


def make_register(n: int) -> tuple[CheckRegister, list[CheckSpec]]:
    register, specs = CheckRegister(), []
    for i in range(n):
        command, expect = KINDS[i % len(KINDS)]
        spec = CheckSpec(command=command, expect=expect, paths=("data.txt",))
        register.add(f"C-{i + 1:04d}", f"B-{i + 1:04d}", spec, 1, f"T1.A{i + 1}", "none")
        specs.append(spec)
    return register, specs


def run_bare(specs: list[CheckSpec], view: Path, jailed: bool) -> None:
    """The N commands with no hoh around them; each run is checked as replay checks it."""
    jail = dataclasses.replace(JAIL, read_only=(view, HOH_PACKAGE), network=Network.none)  # as LocalExecutor adds
    for spec in specs:
        argv = ["bash", "-c", spec.command]
        if jailed:
            argv = bwrap_argv(jail, argv, view, program="bash")
        done = subprocess.run(argv, cwd=view, env=ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if (why := mismatch(spec.expect, done.returncode, done.stdout, done.stderr)) is not None:
            sys.exit(f"{'bwrap' if jailed else 'direct'}: `{spec.command}` did not pass: {why}")


def run_replay(runner: CheckRunner, register: CheckRegister, view: Path, state: Path) -> None:
    out_dir = state / "loops" / "0001" / "replay"
    done = replay(runner, register, view, state, out_dir, loop=1, candidate_id="loop-0001-bench", changed=set(),
                  budget_s=None)
    bad = [f"{r.id} {r.status.value}: {r.reason}" for r in done.results if r.status is not RunStatus.passed]
    if bad or len(done.results) != len(register.active()):
        sys.exit(f"replay: not every check passed ({len(done.results)} results): " + "; ".join(bad[:5]))


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def register_io(register: CheckRegister, path: Path, rounds: int) -> tuple[float, float]:
    """Median seconds of one save and one load of `register`, its histories full."""
    for loop in range(2, 22):  # record_replay keeps the last 20
        for check in register.active():
            register.record_replay(check["id"], loop, f"loop-{loop:04d}-bench", RunStatus.passed)
    saves, loads = [], []
    for _ in range(max(rounds, 3)):
        saves.append(timed(lambda: register.save(path)))
        loads.append(timed(lambda: CheckRegister.load(path)))
    if len(CheckRegister.load(path).active()) != len(register.active()):
        sys.exit(f"register: {path} did not load back its {len(register.active())} checks")
    return statistics.median(saves), statistics.median(loads)


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values)}


def measure(n: int, rounds: int, tmp: Path) -> dict:
    root = tmp / f"n{n}"
    view, state = root / "view", root / "state"
    for name, text in PROJECT.items():
        (view / name).parent.mkdir(parents=True, exist_ok=True)
        (view / name).write_text(text)
    state.mkdir(parents=True)
    register, specs = make_register(n)
    runner = CheckRunner(LOCAL, dataclasses.replace(JAIL, read_only=(view,)), Limits(), root / "scratch")
    sides: dict[str, Callable[[], None]] = {
        "replay": lambda: run_replay(runner, register, view, state),
        "direct": lambda: run_bare(specs, view, jailed=False),
        "bwrap": lambda: run_bare(specs, view, jailed=True),
    }
    names = list(sides)
    run_bare(specs[:1], view, jailed=True)  # warm the page cache for bwrap and bash before the first round
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % 3:] + names[:r % 3]:  # rotate who goes first: the load drifts within a round
            seconds[name].append(timed(sides[name]))
        shutil.rmtree(state / "loops", ignore_errors=True)
    a, b, c = seconds["replay"], seconds["direct"], seconds["bwrap"]
    save_s, load_s = register_io(register, state / "checks.json", rounds)
    return {"checks": n, "rounds": rounds, "replay_s": spread(a), "direct_s": spread(b), "bwrap_s": spread(c),
            "ms_per_check": {k: spread([x / n * 1000 for x in v]) for k, v in seconds.items()},
            "hoh_overhead_ms_per_check": spread([(x - y) / n * 1000 for x, y in zip(a, c)]),
            "jail_ms_per_check": spread([(y - z) / n * 1000 for y, z in zip(c, b)]),
            "ratio_replay_bwrap": spread([x / y for x, y in zip(a, c)]),
            "register_save_ms": save_s * 1000, "register_load_ms": load_s * 1000,
            "register_bytes": (state / "checks.json").stat().st_size}


def show(f: dict) -> str:
    s, m = f"{f['checks']} checks", f["ms_per_check"]
    lines = [f"{s:>10} ({f['rounds']} rounds, min / median):"]
    for side in ("replay", "direct", "bwrap"):
        t = f[f"{side}_s"]
        lines.append(f"  {side:<7} {t['min']:8.3f} / {t['median']:8.3f} s per loop"
                     f"   {m[side]['min']:7.2f} / {m[side]['median']:7.2f} ms per check")
    o, j, q = f["hoh_overhead_ms_per_check"], f["jail_ms_per_check"], f["ratio_replay_bwrap"]
    lines += [f"  hoh's own overhead (replay - bwrap) / N: {o['min']:.2f} / {o['median']:.2f} ms per check; "
              f"the jail's (bwrap - direct) / N: {j['min']:.2f} / {j['median']:.2f} ms",
              f"  ratio replay / bwrap: {q['min']:.2f} / {q['median']:.2f}",
              f"  register ({f['register_bytes'] // 1024} KiB, 20 replays per check): load "
              f"{f['register_load_ms']:.2f} ms, save {f['register_save_ms']:.2f} ms"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checks", default="10,100,500", help="register sizes, comma-separated")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size")
    p.add_argument("--tiny", action="store_true", help="the smoke size: --checks 2,4 --rounds 1")
    p.add_argument("--json", action="store_true", help="print one JSON object with the figures instead")
    args = p.parse_args(argv)
    sizes = [2, 4] if args.tiny else [int(n) for n in args.checks.split(",")]
    rounds = 1 if args.tiny else args.rounds
    if not sizes or min(sizes) < 1 or rounds < 1:
        p.error("--checks needs sizes ≥ 1 and --rounds ≥ 1")
    if shutil.which("bwrap") is None:
        sys.exit("bwrap is not on PATH: the jailed sides need bubblewrap (the Debian package `bubblewrap`)")
    figures = []
    with tempfile.TemporaryDirectory(prefix="hoh-replay-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp:
        for n in sizes:
            figures.append(measure(n, rounds, Path(tmp)))
            if not args.json:
                print(show(figures[-1]), flush=True)
    if args.json:
        print(json.dumps({"sizes": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
