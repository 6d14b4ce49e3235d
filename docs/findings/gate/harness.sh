#!/usr/bin/env bash
# The A/A and A/B pairs of docs/findings/gate.md (from the repository root; PYTHON runs mhabench, default python):
#   docs/findings/gate/harness.sh OUT_DIR loaded PAIRS [FIRST]   A/A pairs on a loaded machine, one pair at a time
#   docs/findings/gate/harness.sh OUT_DIR idle CYCLES [FIRST]    A/B cycles on an idle machine, one cycle at a time
# then: python docs/findings/gate/summarize.py OUT_DIR
#
# A loaded A/A pair i (under $SHARED: other work may run beside it) starts a burner that keeps one core busy half
# the time (0.5 s busy, 0.5 s asleep), makes two one-process runs of the base plugin (aa/i-base_a, aa/i-base_b:
# the plain two-run compare pair) and one `mhabench ab` of the base against itself (aa/i-ab, 3 processes), then
# stops the burner. An idle A/B cycle i (under $EXCLUSIVE: nothing else of ours runs) makes one-process runs of the
# base and of each regression in $REGRESSIONS (ab/i-base, ab/i-xNN: the plain pairs base/xNN) and `mhabench ab` of
# base/xNN (ab/i-ab-xNN), $AB_REPLICATES processes each `ab` run (default 3), in the loaded pairs too.
# REGRESSIONS lists NN:EXTRA_ROWS (default "12:0.12 85:0.85"; the second sitting ran "15:0.15 75:0.75").
# The lock is taken per pair or cycle and let go between them. log.tsv records each command's start, end, exit
# code and `uptime`.
set -u
out=$1
mode=$2
count=$3
first=${4:-0}
python=${PYTHON:-python}
shared=${SHARED:-flock -s /tmp/mhabench-cpu.lock}
exclusive=${EXCLUSIVE:-flock -x /tmp/mhabench-cpu.lock}
here=$(cd "$(dirname "$0")" && pwd)
log="$out/log.tsv"
config="$here/gate.yaml"
regressions=${REGRESSIONS:-"12:0.12 85:0.85"}  # NN:EXTRA_ROWS, sized so `ab` measures about ×1.10 and ×1.35 idle
ab_replicates=${AB_REPLICATES:-3}

bench() {  # NAME COMMAND...: log start, end, exit code and load
  local name=$1
  shift
  printf '%s\tstart\t%s\t%s\n' "$name" "$(date -u +%FT%TZ)" "$(uptime)" >> "$log"
  "$@" > "$out/logs/$name.out" 2>&1
  local code=$?
  printf '%s\tend\t%s\trc=%s\t%s\n' "$name" "$(date -u +%FT%TZ)" "$code" "$(uptime)" >> "$log"
}

run() {  # FOLDER PLUGIN
  bench "run-${1//\//-}" $python -m mhabench run "$config" --plugin "$out/plugins/$2" --out "$out/$1"
}

ab() {  # FOLDER CANDIDATE_PLUGIN
  bench "ab-${1//\//-}" $python -m mhabench ab "$out/plugins/my_fused_x0.py" "$out/plugins/$2" "$config" \
    --out "$out/$1" --replicates "$ab_replicates" --fail-on-regression
}

case "$mode" in
  --aa-pair)  # one loaded A/A pair, called under $SHARED below
    python3 -c 'import time
while True:
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    time.sleep(0.5)' &
    burner=$!
    trap 'kill "$burner"' EXIT
    run "aa/$count-base_a" my_fused_x0.py
    run "aa/$count-base_b" my_fused_x0.py
    ab "aa/$count-ab" my_fused_x0.py
    exit 0
    ;;
  --ab-cycle)  # one idle A/B cycle, called under $EXCLUSIVE below
    run "ab/$count-base" my_fused_x0.py
    for regression in $regressions; do
      run "ab/$count-x${regression%%:*}" "my_fused_x${regression%%:*}.py"
    done
    for regression in $regressions; do
      ab "ab/$count-ab-x${regression%%:*}" "my_fused_x${regression%%:*}.py"
    done
    exit 0
    ;;
esac

mkdir -p "$out/plugins" "$out/logs" "$out/aa" "$out/ab"
cp "$here/my_fused.py" "$out/plugins/my_fused_x0.py"
for regression in $regressions; do
  sed "s/^EXTRA_ROWS = 0.0$/EXTRA_ROWS = ${regression#*:}/" "$here/my_fused.py" > "$out/plugins/my_fused_x${regression%%:*}.py"
done
for ((index = first; index < first + count; index++)); do
  case "$mode" in
    loaded) $shared bash "$0" "$out" --aa-pair "$index" ;;
    idle) $exclusive bash "$0" "$out" --ab-cycle "$index" ;;
    *) echo "mode: loaded or idle, not $mode" >&2; exit 2 ;;
  esac
done
