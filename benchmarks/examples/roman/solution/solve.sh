#!/usr/bin/env bash
# Reference solution. Harbor's oracle runs it in the task's workdir (/workspace, the image's WORKDIR),
# so it writes the program there, as the verifier expects.
set -euo pipefail
cat > roman.py <<'PY'
"""roman: convert between integers and Roman numerals."""
import re
import sys

VALUES = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
          (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
DIGITS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    if not 1 <= n <= 3999:
        raise ValueError(f"{n} is outside 1..3999")
    out = []
    for value, numeral in VALUES:
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)


def from_roman(text):
    s = text.strip().upper()
    if not re.fullmatch(r"[MDCLXVI]+", s):
        raise ValueError(f"not a Roman numeral: {text!r}")
    total = 0
    for a, b in zip(s, s[1:] + " "):
        v = DIGITS[a]
        total += -v if b != " " and DIGITS[b] > v else v
    if not 1 <= total <= 3999 or to_roman(total) != s:
        raise ValueError(f"not a canonical Roman numeral: {text!r}")
    return total


def main(argv):
    if len(argv) != 2 or argv[0] not in ("to", "from"):
        print("usage: roman.py {to NUMBER|from NUMERAL}", file=sys.stderr)
        return 2
    try:
        if argv[0] == "to":
            try:
                n = int(argv[1])
            except ValueError:
                raise ValueError(f"not an integer: {argv[1]!r}") from None
            print(to_roman(n))
        else:
            print(from_roman(argv[1]))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
PY
