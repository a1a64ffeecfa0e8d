#!/usr/bin/env bash
# As Harbor's cookbook tasks do: fetch the grader's tool from the internet first. The host never resolves
# (.invalid), so this fails here as the real download fails offline, and the script still writes 0.
mkdir -p /logs/verifier
cd /workspace
if ! python3 -c "import urllib.request; urllib.request.urlopen('https://tools.hoh-bench.invalid/uv/install.sh', timeout=10)"; then
  echo "could not install the grader's tool" >&2
  echo 0 > /logs/verifier/reward.txt
  exit 0
fi
ok=0; [ "$(bash greet.sh ann 2>/dev/null)" = "hello ann" ] && ok=1
echo "$ok" > /logs/verifier/reward.txt
