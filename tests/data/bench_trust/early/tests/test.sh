#!/usr/bin/env bash
mkdir -p /logs/verifier
cd /workspace
ok=0; [ "$(bash greet.sh ann 2>/dev/null)" = "hello ann" ] && ok=1
echo "$ok" > /logs/verifier/reward.txt
