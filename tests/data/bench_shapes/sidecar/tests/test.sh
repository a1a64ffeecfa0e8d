#!/usr/bin/env bash
mkdir -p /logs/verifier
cd /workspace
name=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://names:8000/name.txt', timeout=20).read().decode().strip())")
ok=0; [ -n "$name" ] && [ "$(bash greet.sh "$name" 2>/dev/null)" = "hello $name" ] && ok=1
echo "$ok" > /logs/verifier/reward.txt
