#!/usr/bin/env bash
# Harbor verifier: checks csvstat.py on generated CSV files; writes reward.json (fraction passed).
set -u
mkdir -p /logs/verifier
cd /workspace
python3 /tests/checks.py
