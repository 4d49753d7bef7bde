#!/usr/bin/env bash
# One shard of a sweep per SLURM array task; merge the shards when the array is done.
#
#   cargo build --release                       # once, on a shared filesystem
#   jid=$(sbatch --parsable --array=1-8 scripts/sweep-slurm.sh testbenches/sweeps/fig9.toml out/shards)
#   sbatch --dependency=afterok:$jid --wrap \
#     "target/release/waferstream sweep testbenches/sweeps/fig9.toml --merge out/shards/fig9-*of8.jsonl --out out/fig9.jsonl"
#
# Task I of N runs `sweep --shard I/N` on the task's CPUs into OUTDIR/STEM-IofN.jsonl. A task
# that was preempted or timed out is rerun with the same command: the sweep resumes its own
# file (points already in it are skipped). The merged file equals an unsharded run's lines
# sorted by id (every field but wall_seconds and cycles_per_second; tests/cli_sweep.rs runs
# this script with SLURM's variables set by hand).
#SBATCH --job-name=waferstream-sweep
#SBATCH --cpus-per-task=4
#SBATCH --time=04:00:00
#SBATCH --output=out/slurm-%A_%a.log
set -euo pipefail
GRID=${1:?usage: sbatch --array=1-N scripts/sweep-slurm.sh GRID.toml [OUTDIR]}
OUT=${2:-out/shards}
I=${SLURM_ARRAY_TASK_ID:?not an array task: submit with sbatch --array=1-N}
N=${SLURM_ARRAY_TASK_COUNT:-${SLURM_ARRAY_TASK_MAX:?}}
BIN=${WAFERSTREAM:-target/release/waferstream}
mkdir -p "$OUT"
stem=$(basename "$GRID" .toml)
exec "$BIN" sweep "$GRID" --shard "$I/$N" --threads "${SLURM_CPUS_PER_TASK:-1}" --out "$OUT/$stem-${I}of${N}.jsonl" --quiet
