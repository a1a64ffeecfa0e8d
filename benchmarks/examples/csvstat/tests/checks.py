"""Checks for csvstat.py, each on its own CSV file; the reward is the fraction that pass."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

TMP = Path(tempfile.mkdtemp())


def csv(name, text):
    path = TMP / name
    path.write_text(text)
    return str(path)


def run(*args):
    return subprocess.run([sys.executable, "csvstat.py", *args], capture_output=True, text=True, timeout=20)


def out(*args):
    p = run(*args)
    return p.stdout.strip() if p.returncode == 0 else None


def error(args, message):
    p = run(*args)
    return p.returncode == 2 and p.stderr.strip() == f"error: {message}"


DATA = csv("data.csv", "name,score,age\nann,1,30\nbob,2,41\ncy,3,25\ndee,4,38\n")
GAPS = csv("gaps.csv", "name,score\na,10\nb,\nc,2.5\nd,\n")
BAD = csv("bad.csv", "name,score\na,1\nb,two\n")
EMPTY = csv("empty.csv", "name,score\na,\n")

CHECKS = {
    "basic_stats": lambda: out(DATA, "score") == "count=4 mean=2.5 min=1 max=4"
    and out(DATA, "age") == "count=4 mean=33.5 min=25 max=41",
    "empty_cells_skipped": lambda: out(GAPS, "score") == "count=2 mean=6.25 min=2.5 max=10",
    "errors": lambda: error([DATA, "height"], "no column height") and error([BAD, "score"], "not a number: two (row 2)")
    and error([EMPTY, "score"], "no values"),
    "median": lambda: out(DATA, "score", "--median") == "count=4 mean=2.5 min=1 max=4 median=2.5"
    and out(GAPS, "score", "--median") == "count=2 mean=6.25 min=2.5 max=10 median=6.25"
    and out(csv("odd.csv", "v\n5\n1\n3\n"), "v", "--median") == "count=3 mean=3 min=1 max=5 median=3",
}

passed = 0
for name, fn in CHECKS.items():
    try:
        ok = bool(fn())
    except Exception as err:  # a hang or crash fails that check only
        ok = False
        print(f"  {name}: {type(err).__name__}: {err}")
    passed += ok
    print("PASS" if ok else "FAIL", name)
print(f"{passed}/{len(CHECKS)} checks passed")
# Every key of reward.json is a reward to Harbor, so only the score goes in it.
Path("/logs/verifier/reward.json").write_text(json.dumps({"reward": passed / len(CHECKS)}))
