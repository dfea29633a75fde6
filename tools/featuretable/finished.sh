# finished NAME prints the latest run directory of recipe NAME under $runs that finished (holds
# metrics.json), or "" when none did; a run of another recipe whose name starts with NAME
# (NAME-bm25-negatives-...) is not one of NAME's. Sourced by study.sh; tested by main_test.go.
finished() {
  local d
  for d in $(ls -d "$runs/$1"-2* 2>/dev/null | sort -r); do
    [[ "$d" =~ $1-[0-9]{8}-[0-9]{6}$ ]] && [ -f "$d/metrics.json" ] && { echo "$d"; return; }
  done
  echo ""
}
