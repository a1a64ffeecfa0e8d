#!/usr/bin/env bash
# Harbor verifier: run the behavioural checks against the candidate in /workspace.
# checks.py writes /logs/verifier/reward.json: the fraction of checks passed (partial credit).
set -u
mkdir -p /logs/verifier
python3 /tests/checks.py /workspace | tee /logs/verifier/checks.txt
