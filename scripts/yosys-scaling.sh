#!/usr/bin/env bash
# The IO-die scheduler's synthesis scaling (issue 8, docs/rtl.md "Scaling"): exports the
# sweep modules of `iodie_scheduler_sweep` (4, 9, 16 chiplets x 16, 32, 64, 128 experts) and
# runs yosys on each — generic `synth -flatten` (cells, flip-flops) and `synth_ice40` (LUT4,
# RAM40_4K, carry, DFF) — with a time limit per run, because the wide sorters take long.
#
#   scripts/yosys-scaling.sh OUT [TIMEOUT_SECONDS]   (default 1800 per yosys run)
#   SWEEP="iodie_sweep_c4_e16 iodie_sweep_c16_e128" scripts/yosys-scaling.sh OUT
#
# Writes OUT/scaling.md and OUT/scaling.json (one row per module: the counts, the seconds
# each run took, or "timeout"). Rows are appended as they finish, so a long sweep can be
# stopped and the finished rows kept. Needs yosys; uses the release binary of
# ${CARGO_TARGET_DIR:-target} when it exists.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: scripts/yosys-scaling.sh OUT [TIMEOUT_SECONDS]" >&2
  exit 2
fi
out="$1"
limit="${2:-1800}"
case "$limit" in ''|*[!0-9]*) echo "yosys-scaling: TIMEOUT_SECONDS must be a whole number, got $limit" >&2; exit 2 ;; esac
command -v yosys >/dev/null 2>&1 || { echo "yosys-scaling: yosys not found (apt-get install -y yosys)" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
if [ -x "$target/release/waferstream" ]; then
  ws=("$target/release/waferstream")
else
  ws=(cargo run --manifest-path "$root/Cargo.toml" --release --quiet --)
fi
modules="${SWEEP:-iodie_sweep_c4_e16 iodie_sweep_c9_e16 iodie_sweep_c16_e16 iodie_sweep_c4_e32 iodie_sweep_c9_e32 iodie_sweep_c16_e32 iodie_sweep_c4_e64 iodie_sweep_c9_e64 iodie_sweep_c16_e64 iodie_sweep_c4_e128 iodie_sweep_c9_e128 iodie_sweep_c16_e128}"
for m in $modules; do
  "${ws[@]}" export-verilog --out "$out/$m" --block "$m" >/dev/null
done

exec python3 - "$out" "$limit" $modules <<'PY'
import json, os, subprocess, sys, time

out, limit, modules = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
report = os.path.join(out, "scaling.json")
rows = json.load(open(report)) if os.path.exists(report) else []
done = {r["module"] for r in rows if "timeout" not in r.values()}

def yosys(d, m, script, kind):
    stat = os.path.join(d, f"{m}.{kind}.json")
    if os.path.exists(stat):
        os.remove(stat)
    t0 = time.time()
    try:
        p = subprocess.run(["yosys", "-q", "-p", script + f"; tee -q -o {stat} stat -json"], cwd=d,
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, f"timeout ({limit} s)"
    if p.returncode != 0 or not os.path.exists(stat):
        return None, f"yosys exit {p.returncode}"
    return json.load(open(stat))["design"]["num_cells_by_type"], round(time.time() - t0)

for m in modules:
    if m in done:
        continue
    d = os.path.join(out, m)
    man = json.load(open(os.path.join(d, "manifest.json")))["modules"][0]
    row = {"module": m, **man["params"]}
    gen, gt = yosys(d, m, f"read_verilog {m}.v; synth -flatten -top {m}", "generic")
    if gen is None:
        row["generic"] = gt
    else:
        row.update(generic_cells=sum(gen.values()), generic_ffs=sum(n for t, n in gen.items() if "DFF" in t),
                   generic_seconds=gt)
    ice, it = yosys(d, m, f"read_verilog {m}.v; synth_ice40 -top {m}", "ice40")
    if ice is None:
        row["ice40"] = it
    else:
        row.update(ice40_lut4=ice.get("SB_LUT4", 0), ice40_ram40_4k=sum(n for t, n in ice.items() if t.startswith("SB_RAM40_4K")),
                   ice40_carry=ice.get("SB_CARRY", 0), ice40_dff=sum(n for t, n in ice.items() if t.startswith("SB_DFF")),
                   ice40_seconds=it)
    rows = [r for r in rows if r["module"] != m] + [row]
    json.dump(rows, open(report, "w"), indent=2)
    print(json.dumps(row), flush=True)

hdr = ["chiplets", "experts", "generic cells", "generic FFs", "ice40 LUT4", "ice40 RAM40_4K", "ice40 carry", "ice40 DFF", "yosys s (generic / ice40)"]
md = ["| " + " | ".join(hdr) + " |", "|" + "---:|" * len(hdr)]
for r in sorted(rows, key=lambda r: (r["experts"], r["chiplets"])):
    g = lambda k, alt: str(r.get(k, r.get(alt, "-")))
    md.append("| " + " | ".join([str(r["chiplets"]), str(r["experts"]), g("generic_cells", "generic"), g("generic_ffs", "generic"),
                                  g("ice40_lut4", "ice40"), g("ice40_ram40_4k", "ice40"), g("ice40_carry", "ice40"), g("ice40_dff", "ice40"),
                                  f"{r.get('generic_seconds', '-')} / {r.get('ice40_seconds', '-')}"]) + " |")
open(os.path.join(out, "scaling.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
