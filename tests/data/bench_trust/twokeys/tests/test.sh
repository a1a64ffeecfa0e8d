#!/usr/bin/env bash
# Two reward keys, no `reward`: correctness (greet.sh prints hello NAME) and performance (it answers at once).
mkdir -p /logs/verifier
cd /workspace
correct=0; [ "$(bash greet.sh ann 2>/dev/null)" = "hello ann" ] && correct=1
fast=0; [ "$correct" = 1 ] && timeout 1 bash greet.sh ann >/dev/null 2>&1 && fast=1
performance=$(python3 -c "print(0.5 + 0.5 * $fast if $correct else 0)")
printf '{"correctness": %s, "performance": %s}\n' "$correct" "$performance" > /logs/verifier/reward.json
