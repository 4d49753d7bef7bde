#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every test.
#   scripts/test.sh            everything (unit, proptest, lockstep, Verilog lint/co-sim, regressions)
# CI (.ci/run) calls exactly this on a clean clone.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- tools for the RTL checks (Verilog export: yosys synth check, Verilator lint, Icarus co-sim)
# nextpnr-ice40 (+ fpga-icestorm) is optional: it adds the Fmax column of
# scripts/verilog-check.sh's yosys report; without it the column says n/a.
missing=()
for t in iverilog vvp verilator yosys python3 parallel nextpnr-ice40 icetime; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/test.sh: installing iverilog verilator yosys parallel nextpnr-ice40 fpga-icestorm (missing: ${missing[*]})"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq iverilog verilator yosys python3 parallel >/dev/null
  $SUDO apt-get install -y -qq nextpnr-ice40 fpga-icestorm >/dev/null \
    || echo "scripts/test.sh: nextpnr-ice40/fpga-icestorm not installable here; Fmax will be n/a"
fi

# --- cocotb (each exported module's Python test, hw/rtl/tests/rtl_cocotb.rs): from PyPI
if ! python3 -c "import cocotb" >/dev/null 2>&1; then
  echo "scripts/test.sh: installing cocotb (pip)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
  fi
  python3 -m pip install --quiet "cocotb>=1.8,<2" 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages "cocotb>=1.8,<2"
fi

# Release build for everything: the simulations in the tests are cycle-level and run
# 20-50x faster optimised; one build serves tests, regressions and the smoke runs (the same
# feature set everywhere: a `cargo run` without the test's features rebuilt the binary and
# the RTL crate, ~5 minutes).
export CARGO_TERM_COLOR=never
echo "== cargo test (workspace, release, RTL tool tests on)"
mkdir -p out
set +e
cargo test --release --workspace --features waferstream-rtl/yosys > out/test.log 2>&1
status=$?
set -e
if [ "$status" != 0 ]; then
  cat out/test.log
else
  grep -E "^(test result|     Running)" out/test.log || true
fi

echo "== regression suite"
set +e
cargo run --release --features rtl/yosys --quiet -- regress --junit out/regress.xml
rstatus=$?
set -e

echo "== acceptance smoke: BookSim comparison sweep"
cargo run --release --features rtl/yosys --quiet -- noc --k 8 --vcs 2 --vc-buf 8 --packet-size 1 --traffic uniform \
    --rates 0.05,0.10,0.15,0.20,0.25 --seed 0 --json out/noc.json --quiet

passed=$(grep -Eo "test result: [A-Za-z]+\. [0-9]+ passed" out/test.log | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo "[0-9]+ failed" out/test.log | awk '{s+=$1} END {print s+0}')
if [ "$status" != 0 ] || [ "$rstatus" != 0 ]; then
  echo "scripts/test.sh: FAILED (cargo test exit $status, regress exit $rstatus)"
  echo "$passed passed, $((failed > 0 ? failed : 1)) failed"
  exit 1
fi
echo "$passed passed, $failed failed"
