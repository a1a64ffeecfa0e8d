"""Checks for roman.py; the reward is the fraction of checks that pass."""

import json
import subprocess
import sys
from pathlib import Path

WS = Path(sys.argv[1] if len(sys.argv) > 1 else "/workspace")
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def run(*args):
    return subprocess.run([sys.executable, str(WS / "roman.py"), *args], cwd=WS, capture_output=True,
                          text=True, timeout=20, stdin=subprocess.DEVNULL)


PAIRS = [(4, "IV"), (14, "XIV"), (90, "XC"), (1994, "MCMXCIV"), (3999, "MMMCMXCIX")]


def fails(proc):
    return proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr


@check
def to_numerals():
    return all(run("to", str(n)).stdout.strip() == r for n, r in PAIRS)


@check
def to_rejects_bad_numbers():
    return all(fails(run("to", arg)) for arg in ("0", "4000", "abc"))


@check
def from_numerals():
    return all(run("from", r).stdout.strip() == str(n) for n, r in PAIRS) and run("from", "mcmxciv").stdout.strip() == "1994"


@check
def from_rejects_noncanonical():
    return all(fails(run("from", arg)) for arg in ("IIII", "VX", "IC", ""))


def main() -> None:
    passed = 0
    for fn in CHECKS:
        try:
            ok = bool(fn())
        except Exception as err:  # a crash or a hang of the program fails that check only
            ok = False
            print(f"  {fn.__name__}: {type(err).__name__}: {err}")
        passed += ok
        print(f"{'PASS' if ok else 'FAIL'} {fn.__name__}")
    print(f"{passed}/{len(CHECKS)} checks passed")
    # Every key of reward.json is a reward to Harbor, so only the score goes in it.
    Path("/logs/verifier/reward.json").write_text(json.dumps({"reward": passed / len(CHECKS)}))


if __name__ == "__main__":
    main()
