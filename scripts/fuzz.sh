#!/usr/bin/env bash
# Fuzz every target for N cases each (the release bar: N = 100000; docs/reliability.md
# records the last run).
#   scripts/fuzz.sh 100000                 every target
#   scripts/fuzz.sh 100000 vcd fst trace   only these (vcd fst toml trace pkgcfg wafercfg scenariocfg balancecfg cli)
#   FUZZ_CLI_CASES=20000 scripts/fuzz.sh 100000   fewer cases for the CLI target (each case
#                                          spawns the binary: ~10 ms per case)
# In-process targets: testbenches/tests/fuzz.rs; the CLI target: tests/fuzz_cli.rs. Both run
# in `scripts/test.sh` too (2000 cases per in-process target, 200 for the CLI).
# A failure prints the case and the file its input was saved to.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2000}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(vcd fst toml trace pkgcfg wafercfg scenariocfg balancecfg cli); fi
inproc=()
cli=0
for t in "${targets[@]}"; do
  case "$t" in
    cli) cli=1 ;;
    vcd|fst|toml|trace|pkgcfg|wafercfg|scenariocfg|balancecfg) inproc+=("fuzz_$t") ;;
    *) echo "unknown target $t (vcd fst toml trace pkgcfg wafercfg scenariocfg balancecfg cli)" >&2; exit 2 ;;
  esac
done
status=0
filter='^fuzz |panicked|case [0-9]+|test result'
if [ ${#inproc[@]} -gt 0 ]; then
  FUZZ_CASES="$N" cargo test --release -p waferstream-testbenches --test fuzz -- --nocapture --test-threads 2 --exact "${inproc[@]}" 2>&1 \
    | grep -E "$filter" || status=1
fi
if [ "$cli" = 1 ]; then
  FUZZ_CASES="${FUZZ_CLI_CASES:-$N}" cargo test --release -p waferstream --test fuzz_cli -- --nocapture --exact fuzz_cli 2>&1 \
    | grep -E "$filter" || status=1
fi
exit $status
