#!/usr/bin/env bash
# Reference solution. Harbor's oracle runs it in the task's workdir (/workspace, the image's WORKDIR),
# so it writes the program there, as the verifier expects.
set -euo pipefail
cat > kv.sh <<'SH'
#!/usr/bin/env bash
# kv.sh: a key-value store in one file (lines KEY<TAB>VALUE).
set -u
DB="${KV_FILE:-./kv.db}"
touch "$DB"

usage() { echo "usage: kv.sh set KEY VALUE | get KEY | del KEY | list" >&2; exit 2; }
check_key() { [[ "$1" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "error: bad key" >&2; exit 2; }; }
without() { awk -F '\t' -v k="$1" '$1 != k' "$DB"; }
has() { awk -F '\t' -v k="$1" '$1 == k {found=1} END {exit !found}' "$DB"; }
replace_db() { local tmp; tmp="$(mktemp "$DB.XXXXXX")"; cat > "$tmp"; mv "$tmp" "$DB"; }

case "${1:-}" in
  set) [ $# -eq 3 ] || usage; check_key "$2"
       { without "$2"; printf '%s\t%s\n' "$2" "$3"; } | replace_db ;;
  get) [ $# -eq 2 ] || usage; check_key "$2"
       has "$2" || { echo "error: no such key" >&2; exit 1; }
       awk -F '\t' -v k="$2" '$1 == k {sub(/^[^\t]*\t/, ""); print}' "$DB" ;;
  del) [ $# -eq 2 ] || usage; check_key "$2"
       has "$2" || { echo "error: no such key" >&2; exit 1; }
       without "$2" | replace_db ;;
  list) [ $# -eq 1 ] || usage
        LC_ALL=C sort -t "$(printf '\t')" -k1,1 "$DB" | awk -F '\t' '{k=$1; sub(/^[^\t]*\t/, ""); print k "=" $0}' ;;
  *) usage ;;
esac
SH
chmod +x kv.sh
