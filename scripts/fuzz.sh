#!/usr/bin/env bash
# Fuzz every target (testbenches/tests/fuzz.rs: vcd, fst, toml) for N cases each.
#   scripts/fuzz.sh 100000     the release bar (docs/reliability.md records the last run)
# scripts/test.sh runs the same harness with the default 2000 cases per target.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2000}"
FUZZ_CASES="$N" cargo test --release -p waferstream-testbenches --test fuzz -- --nocapture --test-threads 2 2>&1 \
  | grep -E "^fuzz |panicked|case [0-9]+|test result"
