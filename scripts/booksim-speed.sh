#!/usr/bin/env bash
# BookSim2's speed experiment, side by side with ours (issue 22, docs/results-noc.md "Speed"):
# builds BookSim2 from a source tree, writes the reference configuration (8x8 mesh, iq router,
# 2 VCs x 8 flits, uniform traffic, 1-flit packets, injection 0.30, latency mode, seed 0 —
# ../shared/reference/booksim/README.md), times N runs with /usr/bin/time and prints the
# median wall time and simulated cycles per second. Fetching the source is left to the user:
#   git clone https://github.com/booksim/booksim2 && git -C booksim2 checkout 28f43299
#
#   scripts/booksim-speed.sh BOOKSIM_SRC_DIR [RUNS] [RATE]     (default 7 runs, rate 0.30)
#
# Needs g++, make, flex and bison (BookSim's Makefile builds with g++ -O3). With
# WAFERSTREAM=path/to/waferstream set, it then runs `waferstream bench noc --threads 1
# --repeat RUNS` at the same rate and prints both figures and the ratio.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/booksim-speed.sh BOOKSIM_SRC_DIR [RUNS] [RATE]" >&2
  exit 2
fi
src="$(realpath "$1")"
runs="${2:-7}"
rate="${3:-0.30}"
[ -f "$src/src/Makefile" ] || { echo "no BookSim2 tree at $src (expected src/Makefile)" >&2; exit 2; }
for t in g++ make flex bison; do
  command -v "$t" >/dev/null || { echo "needs $t (e.g. apt-get install -y flex bison g++ make)" >&2; exit 2; }
done
# BookSim's own Makefile: g++ -O3 -g, flex/bison for the config parser.
make -C "$src/src" -j"$(nproc)" >/dev/null
bin="$src/src/booksim"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/speed.cfg" <<EOF
topology = mesh;
k = 8;
n = 2;
routing_function = dor;
router = iq;
num_vcs = 2;
vc_buf_size = 8;
traffic = uniform;
packet_size = 1;
injection_rate_uses_flits = 1;
sim_type = latency;
seed = 0;
injection_rate = $rate;
EOF
walls=()
cycles=""
for i in $(seq "$runs"); do
  # BookSim exits non-zero after a normal latency run; the time line is what counts.
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin" "$work/speed.cfg" > "$work/out" 2>&1 || true
  c="$(sed -n 's/^Time taken is \([0-9]*\) cycles$/\1/p' "$work/out" | tail -1)"
  [ -n "$c" ] || { echo "BookSim run $i printed no 'Time taken' line:" >&2; tail -5 "$work/out" >&2; exit 1; }
  [ -z "$cycles" ] || [ "$c" = "$cycles" ] || { echo "run $i: $c cycles, run 1: $cycles (not deterministic?)" >&2; exit 1; }
  cycles="$c"
  # (GNU time puts "Command exited with non-zero status" before the format line.)
  read -r wall rss < <(tail -1 "$work/time")
  walls+=("$wall")
  echo "booksim run $i: $wall s, $rss KB max RSS, $c cycles" >&2
done
median="$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
bs_cps="$(awk -v c="$cycles" -v w="$median" 'BEGIN {printf "%.0f", c / w}')"
echo "booksim2 $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '(no git)'): $cycles cycles, median $median s of $runs runs (min $(printf '%s\n' "${walls[@]}" | sort -g | head -1), max $(printf '%s\n' "${walls[@]}" | sort -g | tail -1)) = $bs_cps cycles/s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
if [ -n "${WAFERSTREAM:-}" ]; then
  ours="$("$WAFERSTREAM" bench noc --k 8 --rate "$rate" --threads 1 --repeat "$runs" | awk '$1 == "1" {print $6}')"
  echo "waferstream bench noc --threads 1 --repeat $runs: $ours cycles/s = $(awk -v a="$ours" -v b="$bs_cps" 'BEGIN {printf "%.1f", a / b}')x BookSim2 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
fi
