#!/usr/bin/env bash
# The gate's false-alarm rate (docs/findings/history.md): N runs of one unchanged plugin, each on its own
# empty commit (as CI sees a commit that did not touch the code), the gate after each run, and a copy of the
# store after each run so other thresholds can be judged on the same data afterwards.
# Usage: history_false_alarms.sh WORK_DIR [N]   (mhabench on PATH, or MHABENCH="python -m mhabench")
set -euo pipefail
work=$1; runs=${2:-24}; mhabench=${MHABENCH:-mhabench}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/plugin" "$work/snapshots"
git -C "$work/plugin" init -q
cp "$here/my_attention.py" "$work/plugin/"
git -C "$work/plugin" add my_attention.py
git -C "$work/plugin" -c user.name=bench -c user.email=bench@example.com commit -qm "plugin"
for i in $(seq 1 "$runs"); do
  git -C "$work/plugin" -c user.name=bench -c user.email=bench@example.com commit -q --allow-empty -m "unchanged $i"
  $mhabench run "$here/history-small.yaml" --plugin "$work/plugin/my_attention.py" --out "$work/runs" \
    --history "$work/history" > "$work/run-$i.log" 2>&1
  cp "$work/history/history.sqlite" "$work/snapshots/$i.sqlite"
  set +e; $mhabench history "$work/history" --gate > /dev/null 2> "$work/gate-$i.log"; code=$?; set -e
  echo "run $i gate exit $code: $(tail -1 "$work/gate-$i.log")" | tee -a "$work/gate.log"
done
