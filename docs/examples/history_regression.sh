#!/usr/bin/env bash
# A plugin's timeline with an injected regression (docs/findings/history.md): six commits, the fourth makes
# the plugin compute attention twice; two runs per commit; the gate after each commit; then bisect.
# Usage: history_regression.sh WORK_DIR   (mhabench on PATH, or MHABENCH="python -m mhabench")
set -euo pipefail
work=$1; mhabench=${MHABENCH:-mhabench}
here=$(cd "$(dirname "$0")" && pwd)
repo=$work/plugin
mkdir -p "$repo"
git -C "$repo" init -q
commit() { git -C "$repo" add -A; git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -qm "$1"; }
measure() {
  for r in 1 2; do
    $mhabench run "$here/history-small.yaml" --plugin "$repo/my_attention.py" --out "$work/runs" \
      --history "$work/history" > "$work/run-$(git -C "$repo" rev-parse --short HEAD)-$r.log" 2>&1
  done
  set +e; $mhabench history "$work/history" --gate > /dev/null 2> "$work/gate.tmp"; code=$?; set -e
  echo "$(git -C "$repo" log -1 --format='%h %s') | gate exit $code: $(tail -1 "$work/gate.tmp")" | tee -a "$work/gate.log"
}
cp "$here/my_attention.py" "$repo/"; commit "1 plugin"; measure
sed -i 's/^"""An mhabench plugin/"""An mhabench plugin (v2)/' "$repo/my_attention.py"; commit "2 docstring"; measure
sed -i 's/def heads_of(t/def split_heads(t/; s/heads_of(F.linear/split_heads(F.linear/' "$repo/my_attention.py"
commit "3 rename heads_of"; measure
sed -i 's/out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)/out = ((F.scaled_dot_product_attention(q, k, v, is_causal=self.causal) + F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)) \/ 2)/' "$repo/my_attention.py"
grep -q "+ F.scaled_dot_product_attention" "$repo/my_attention.py"
commit "4 average two attention passes (the injected regression)"; measure
sed -i 's/^"""An mhabench plugin (v2)/"""An mhabench plugin (v3)/' "$repo/my_attention.py"; commit "5 docstring"; measure
echo "# tidy" >> "$repo/my_attention.py"; commit "6 trailing comment"; measure
