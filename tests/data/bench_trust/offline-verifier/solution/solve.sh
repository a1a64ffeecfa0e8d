#!/usr/bin/env bash
# Reference solution: Harbor's oracle runs it in the task's workdir (/workspace).
set -euo pipefail
printf 'echo "hello $1"\n' > greet.sh
