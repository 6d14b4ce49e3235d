#!/usr/bin/env bash
# The A/A and A/B pairs of docs/findings/gate.md, cycle after cycle for as many minutes as given.
#   PYTHON=.venv/bin/python docs/findings/gate/harness.sh OUT_DIR MINUTES [FIRST_CYCLE]   (from the repository root)
# then: .venv/bin/python docs/findings/gate/summarize.py OUT_DIR
# A cycle i: one-process runs of the base plugin (twice), of +1 and of +4 extra head products (plain two-run
# compare pairs: base/base A/A, base/+1 and base/+4 A/B), and `mhabench ab` of base/base, base/+1, base/+4 (3
# processes each). Each cycle holds /tmp/mhabench-bench.lock, so no other benchmark shares the machine's
# benchmark slot while it runs; log.tsv records each command's start, end, exit code and `uptime` (the runs of
# docs/findings/gate.md logged rc=0 for every command: a bug fixed since; summarize.py recomputes every exit code).
set -u
out=$1
minutes=$2
cycle=${3:-0}
python=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
log="$out/log.tsv"

bench() {  # NAME COMMAND...: log start, end, exit code and load
  local name=$1
  shift
  printf '%s\tstart\t%s\t%s\n' "$name" "$(date -u +%FT%TZ)" "$(uptime)" >> "$log"
  "$@" > "$out/$name.out" 2>&1
  local code=$?
  printf '%s\tend\t%s\trc=%s\t%s\n' "$name" "$(date -u +%FT%TZ)" "$code" "$(uptime)" >> "$log"
}

run() {  # CYCLE NAME PLUGIN
  bench "run-$1-$2" "$python" -m mhabench run "$here/gate.yaml" --plugin "$out/plugins/$3" --out "$out/runs/$1-$2"
}

ab() {  # CYCLE EXTRA
  bench "ab-$1-x$2" "$python" -m mhabench ab "$out/plugins/my_fused_x0.py" "$out/plugins/my_fused_x$2.py" \
    "$here/gate.yaml" --out "$out/ab/$1-x$2" --fail-on-regression
}

if [ "$minutes" = "--cycle" ]; then  # one cycle, called under the lock below
  run "$cycle" base_a my_fused_x0.py
  run "$cycle" base_b my_fused_x0.py
  ab "$cycle" 0
  run "$cycle" x1 my_fused_x1.py
  ab "$cycle" 1
  run "$cycle" x4 my_fused_x4.py
  ab "$cycle" 4
  exit 0
fi

mkdir -p "$out/plugins" "$out/runs" "$out/ab"
cp "$here/my_fused.py" "$out/plugins/my_fused_x0.py"
for extra in 1 4; do
  sed "s/^EXTRA_HEADS = 0$/EXTRA_HEADS = $extra/" "$here/my_fused.py" > "$out/plugins/my_fused_x$extra.py"
done
end=$(( $(date +%s) + minutes * 60 ))
while [ "$(date +%s)" -lt "$end" ]; do
  flock /tmp/mhabench-bench.lock bash "$0" "$out" --cycle "$cycle"
  cycle=$((cycle + 1))
done
