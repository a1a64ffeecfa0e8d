#!/usr/bin/env bash
# Reference solution. Harbor's oracle runs it in the task's workdir (/workspace, the image's WORKDIR),
# so it writes the program there, as the verifier expects.
set -euo pipefail
cat > wordfreq.py <<'PY'
"""wordfreq: word frequencies of a text, most frequent first."""
import argparse
import re
import sys
from collections import Counter

WORD = re.compile(r"[A-Za-z0-9']+")


def frequencies(text):
    counts = Counter(w.lower() for w in WORD.findall(text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def main(argv):
    parser = argparse.ArgumentParser(prog="wordfreq.py")
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as err:
        print(f"error: {args.file}: {err.strerror}", file=sys.stderr)
        return 1
    for word, count in frequencies(text)[: args.top]:
        print(word, count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
PY
