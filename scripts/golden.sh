#!/usr/bin/env bash
# Behaviour check across a change: runs a fixed set of representative commands with two
# binaries (the commit before the change and the one after) and compares their JSON results
# (wall-clock fields removed) and their waveform bytes.
#   scripts/golden.sh BASE_BIN NEW_BIN [OUT_DIR]
# Build BASE_BIN from the earlier commit in a worktree, e.g.
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release --bin waferstream)
# Exit 0 when every output is identical, 1 otherwise (the differing files are listed).
set -uo pipefail
BASE="$(realpath "$1")"; NEW="$(realpath "$2")"; OUT="${3:-out/golden}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
rm -rf "$OUT"; mkdir -p "$OUT/base" "$OUT/new"
OUT="$(realpath "$OUT")"

# Each line: a name, then the arguments (run from the output folder; $ROOT for repo inputs).
cmds=(
  "noc|noc --k 4 --rates 0.1,0.3 --seed 3 --json noc.json --vcd noc.vcd --quiet"
  "pkg|package --functional --tokens 16 --array 2x2 --strategy ep,hydra-oracle,a3,a4 --json pkg.json --vcd pkg.vcd"
  "pkgfst|package --tokens 32 --array 2x2 --strategy a3 --json pkgfst.json --fst pkg.fst"
  "pkg4x4|package --tokens 16 --array 4x4 --strategy a3,a5,ep --json pkg4x4.json --vcd pkg4x4.vcd"
  "run|run --json run.json"
  "wafer|wafer --model deepseek-v3 --wafer 4x4 --tp 4 --mapping baseline,er --json wafer.json --vcd wafer.vcd"
  "waferf|wafer --model qwen3-30b-a3b --wafer 4x4 --tp 4 --mapping er --functional --json waferf.json"
  "balance|balance --model qwen3-235b --wafer 4x4 --tp 4 --dp 4 --scenario mixed --balancer none,eplb,topo-ni --iters 4 --json balance.json"
  "gps|gps --skew 1.0,1.4 --bandwidth slow,fast --accuracy 0.9 --json gps.json"
  "semmoe|semmoe --model qwen3-30b-a3b --devices 8 --json semmoe.json"
  "sweep|sweep $ROOT/testbenches/sweeps/smoke.toml --out sweep.jsonl --threads 1 --quiet"
  "pkgiters|package --functional --tokens 8 --iters 0..3 --layers 0..2 --strategy a3,a5 --skew 2.5 --json pkgiters.json --vcd pkgiters.vcd"
  "runnamed|run noc-sweep --json runnamed.json --quiet"
  # wafer side
  "balvcd|balance --iters 10 --tokens-per-group 1024 --warmup 2 --alpha 0.1 --json balvcd.json --vcd balvcd.vcd --quiet"
  "semtp|semmoe --model qwen3-30b-a3b --devices 8 --attention tp --tp-batch 64 --json semtp.json --vcd semtp.vcd"
  "gpsvcd|gps --skew 1.2 --bandwidth fast --accuracy 0.8 --iters 1 --json gpsvcd.json --vcd gpsvcd.vcd"
  "waferfst|wafer --model qwen3-30b-a3b --wafer 2x2 --wafers 2x1 --tp 2 --mapping baseline,her --skew 1.5 --fst waferfst.fst --json waferfst.json"
)
status=0
for side in base new; do
  bin="$BASE"; [ "$side" = new ] && bin="$NEW"
  for c in "${cmds[@]}"; do
    name="${c%%|*}"; args="${c#*|}"
    ( cd "$OUT/$side" && eval "\"$bin\" $args" > "$name.stdout" 2> "$name.stderr"; echo $? > "$name.rc" )
  done
done
# Wall-clock and speed fields differ run to run; everything else must not.
strip() { python3 - "$1" <<'PY'
import json, sys, re
drop = re.compile(r"^(wall.*|elapsed.*|.*per_second|.*_per_s)$")
def walk(v):
    if isinstance(v, dict):
        return {k: walk(x) for k, x in v.items() if not drop.match(k)}
    if isinstance(v, list):
        return [walk(x) for x in v]
    return v
with open(sys.argv[1]) as f:
    txt = f.read()
try:
    docs = [json.loads(txt)]
except ValueError:
    docs = [json.loads(l) for l in txt.splitlines() if l.strip()]
print(json.dumps([walk(d) for d in docs], sort_keys=True, indent=1))
PY
}
for f in $(cd "$OUT/base" && find . -type f | sort); do
  a="$OUT/base/$f"; b="$OUT/new/$f"
  case "$f" in
    *.stderr|*.stdout) continue ;;
  esac
  if [ ! -e "$b" ]; then echo "missing in new: $f"; status=1; continue; fi
  case "$f" in
    *.json|*.jsonl)
      d="$OUT/$(echo "$f" | tr / _).diff"
      if ! diff <(strip "$a") <(strip "$b") > "$d"; then echo "DIFFERS: $f (see $d)"; status=1; else rm -f "$d"; fi ;;
    *)
      if ! cmp -s "$a" "$b"; then echo "DIFFERS: $f"; status=1; fi ;;
  esac
done
for f in $(cd "$OUT/new" && find . -type f | sort); do [ -e "$OUT/base/$f" ] || { echo "new only: $f"; }; done
[ $status = 0 ] && echo "golden: identical ($(cd "$OUT/base" && find . -type f | wc -l) files)"
exit $status
