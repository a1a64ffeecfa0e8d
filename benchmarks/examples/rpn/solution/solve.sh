#!/usr/bin/env bash
# Reference solution. Harbor's oracle runs it in the task's workdir (/workspace, the image's WORKDIR),
# so it writes the program there, as the verifier expects.
set -euo pipefail
cat > rpn.py <<'PY'
"""rpn: evaluate a Reverse Polish Notation expression."""
import sys

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


class RpnError(Exception):
    pass


def evaluate(expr):
    stack = []
    for token in expr.split():
        if token in OPS:
            if len(stack) < 2:
                raise RpnError("stack underflow")
            b, a = stack.pop(), stack.pop()
            if token == "/" and b == 0:
                raise RpnError("division by zero")
            stack.append(OPS[token](a, b))
        else:
            try:
                stack.append(float(token))
            except ValueError:
                raise RpnError(f"bad token {token}") from None
    if len(stack) != 1:
        raise RpnError("leftover operands")
    return stack[0]


def fmt(value):
    return str(int(value)) if value == int(value) else repr(value)


def main(argv):
    try:
        print(fmt(evaluate(argv[0] if argv else "")))
    except RpnError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
PY
