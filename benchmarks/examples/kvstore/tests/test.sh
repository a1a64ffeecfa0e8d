#!/usr/bin/env bash
# Harbor verifier: behavioural checks of kv.sh; writes reward.json with the fraction passed.
set -u
mkdir -p /logs/verifier
cd /workspace
passed=0
total=4
names=()
kv() { bash kv.sh "$@"; }

check() {
  export KV_FILE; KV_FILE=$(mktemp -u /tmp/kv-test.XXXXXX)
  if "$1"; then passed=$((passed + 1)); echo "PASS $1"; else echo "FAIL $1"; fi
  rm -f "$KV_FILE"
}
set_get() {
  kv set color blue && kv set greeting 'hello big world' && kv set color green || return 1
  [ "$(kv get color)" = green ] && [ "$(kv get greeting)" = 'hello big world' ]
}
errors() {
  kv get nothing > /dev/null 2> /tmp/kv-err; [ $? -eq 1 ] && grep -q '^error: no such key' /tmp/kv-err || return 1
  kv set 'bad key!' x 2> /tmp/kv-err; [ $? -eq 2 ] && grep -q '^error: bad key' /tmp/kv-err
}
delete() {
  kv set a 1 && kv set b 2 && kv del a || return 1
  kv get a > /dev/null 2>&1; [ $? -eq 1 ] && [ "$(kv get b)" = 2 ] || return 1
  kv del a 2> /dev/null; [ $? -eq 1 ]
}
list_sorted() {
  kv set zeta 'last one' && kv set alpha 1 && kv set mid.key x-y || return 1
  [ "$(kv list)" = $'alpha=1\nmid.key=x-y\nzeta=last one' ]
}
check set_get
check errors
check delete
check list_sorted
echo "$passed/$total checks passed"
# Every key of reward.json is a reward to Harbor, so only the score goes in it.
printf '{"reward": %s}\n' "$(python3 -c "print($passed / $total)")" > /logs/verifier/reward.json
