#!/usr/bin/env bash
# Reference solution. Harbor's oracle runs it in the task's workdir (/workspace, the image's WORKDIR),
# so it writes the program there, as the verifier expects.
set -euo pipefail
cat > csvstat.py <<'PY'
"""csvstat: count, mean, min, max (and median) of a numeric CSV column."""
import argparse
import csv
import statistics
import sys


class StatError(Exception):
    pass


def column_values(path, column):
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if column not in (reader.fieldnames or []):
            raise StatError(f"no column {column}")
        values = []
        for row_number, row in enumerate(reader, 1):
            cell = (row.get(column) or "").strip()
            if not cell:
                continue
            try:
                values.append(float(cell))
            except ValueError:
                raise StatError(f"not a number: {cell} (row {row_number})") from None
    if not values:
        raise StatError("no values")
    return values


def main(argv):
    parser = argparse.ArgumentParser(prog="csvstat.py")
    parser.add_argument("file")
    parser.add_argument("column")
    parser.add_argument("--median", action="store_true")
    args = parser.parse_args(argv)
    try:
        values = column_values(args.file, args.column)
    except (StatError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    line = "count=%d mean=%g min=%g max=%g" % (len(values), statistics.fmean(values), min(values), max(values))
    if args.median:
        line += " median=%g" % statistics.median(values)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
PY
