#!/usr/bin/env bash
# Harbor verifier: count the behavioural checks that pass and write the fraction to reward.txt.
set -u
mkdir -p /logs/verifier
cd /workspace
passed=0
total=4
sample=$(mktemp)
printf 'the cat and the dog\nThe end. And then: the CAT!\n' > "$sample"
expected_all=$'the 4\nand 2\ncat 2\ndog 1\nend 1\nthen 1'

check() {  # check NAME: runs the function NAME, counts a pass
  if "$1"; then passed=$((passed + 1)); echo "PASS $1"; else echo "FAIL $1"; fi
}
counts_in_order() { [ "$(python3 wordfreq.py "$sample" 2>/dev/null)" = "$expected_all" ]; }
case_and_punctuation() {
  [ "$(printf "Hello, hello! HELLO world. Don't don't\n" > "$sample.2"; python3 wordfreq.py "$sample.2" 2>/dev/null)" \
    = $'hello 3\ndon\'t 2\nworld 1' ]
}
top_n() { [ "$(python3 wordfreq.py "$sample" --top 2 2>/dev/null)" = $'the 4\nand 2' ]; }
stdin_and_errors() {
  [ "$(python3 wordfreq.py - < "$sample" 2>/dev/null)" = "$expected_all" ] || return 1
  python3 wordfreq.py /no/such/file > /dev/null 2> "$sample.err"
  [ $? -eq 1 ] && grep -q '^error:' "$sample.err" && ! grep -q Traceback "$sample.err"
}
check counts_in_order
check case_and_punctuation
check top_n
check stdin_and_errors
python3 -c "print($passed / $total)" > /logs/verifier/reward.txt
