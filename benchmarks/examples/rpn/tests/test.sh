#!/usr/bin/env bash
# Harbor verifier: table-driven checks of rpn.py; reward.txt is the fraction of groups passed.
set -u
mkdir -p /logs/verifier
cd /workspace
python3 - <<'PY'
import subprocess
import sys
from pathlib import Path


def run(expr):
    return subprocess.run([sys.executable, "rpn.py", expr], capture_output=True, text=True, timeout=20)


def prints(expr, out):
    p = run(expr)
    return p.returncode == 0 and p.stdout.strip() == out


def error(expr, message):
    p = run(expr)
    return p.returncode == 1 and p.stderr.strip() == f"error: {message}" and p.stdout == ""


GROUPS = {
    "integer_arithmetic": [prints("3 4 + 2 *", "14"), prints("5 1 2 + 4 * + 3 -", "14"), prints("-2 3 *", "-6"),
                           prints("10 4 -", "6")],
    "division_and_format": [prints("7 2 /", "3.5"), prints("6 3 /", "2"), prints("1.5 2 *", "3"),
                            prints("1 4 /", "0.25")],
    "bad_input": [error("1 0 /", "division by zero"), error("2 x +", "bad token x"), error("", "leftover operands")],
    "stack_errors": [error("1 +", "stack underflow"), error("+", "stack underflow"), error("1 2", "leftover operands")],
}
passed = 0
for name, results in GROUPS.items():
    ok = all(results)
    passed += ok
    print("PASS" if ok else "FAIL", name)
Path("/logs/verifier/reward.txt").write_text(f"{passed / len(GROUPS)}\n")
PY
