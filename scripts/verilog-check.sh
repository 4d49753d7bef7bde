#!/usr/bin/env bash
# Checks a Verilog export (`waferstream export-verilog --out DIR`) module by module:
#   1. verilator --lint-only -Wall with DIR's waiver file: must be clean; without the waivers,
#      only waived rules may fire (the waiver file stays narrow);
#   2. co-sim (modules with co-sim files): iverilog -g2012 + vvp of the generated testbench,
#      must print `PASS <module>`;
#   3. `waferstream wave diff <module>.rust.vcd <module>.icarus.vcd` must say `same`;
#   4. yosys: generic `synth -flatten` (cells, flip-flops) and `synth_ice40` (LUT4, RAM40_4K,
#      carry, DFF), plus an Fmax estimate from nextpnr-ice40 (hx8k) when it is installed.
# Writes DIR/yosys-report.json and DIR/yosys-report.md, prints one line per module, and exits
# 0 only when every module passes every step (1 otherwise, 2 for a usage/tool problem).
#
#   scripts/verilog-check.sh DIR
#   VERILOG_CHECK_SYNTH=quick scripts/verilog-check.sh DIR   (step 4 elaborates only: the CI test)
#
# The wave diff uses ${CARGO_TARGET_DIR:-target}/release/waferstream when it exists, else
# `cargo run --release --quiet --`. Scratch files (vvp images, logs, ice40 netlists) go to
# DIR/build/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: scripts/verilog-check.sh DIR   (DIR from: waferstream export-verilog --out DIR)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
if [ ! -f "$dir/manifest.json" ]; then
  echo "verilog-check: $dir/manifest.json not found (run: waferstream export-verilog --out $1)" >&2
  exit 2
fi
missing=()
for t in python3 verilator iverilog vvp yosys; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "verilog-check: missing tool(s): ${missing[*]} (apt-get install -y python3 verilator iverilog yosys)" >&2
  exit 2
fi
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
if [ -x "$target/release/waferstream" ]; then
  wave_cmd="$target/release/waferstream"
else
  wave_cmd="cargo run --manifest-path $root/Cargo.toml --release --quiet --"
fi

exec python3 - "$dir" "$wave_cmd" <<'PY'
import concurrent.futures, json, os, re, shlex, shutil, subprocess, sys

dir_, wave_cmd = sys.argv[1], shlex.split(sys.argv[2])
manifest = json.load(open(os.path.join(dir_, "manifest.json")))
waivers = manifest["verilator_waivers"]
build = os.path.join(dir_, "build")
os.makedirs(build, exist_ok=True)
waived = set(re.findall(r"^\s*lint_off\s+-rule\s+(\S+)", open(os.path.join(dir_, waivers)).read(), re.M))
nextpnr = shutil.which("nextpnr-ice40")
NO_FMAX = "n/a (no nextpnr/icetime)"
# Place-and-route budget per module: the Fmax is an estimate; a near-full device is left
# without one rather than holding the check for tens of minutes (NEXTPNR_SECONDS=... to change).
NEXTPNR_SECONDS = int(os.environ.get("NEXTPNR_SECONDS", "300"))
SYNTH = os.environ.get("VERILOG_CHECK_SYNTH", "full")
if SYNTH not in ("full", "quick"):
    print(f"verilog-check: VERILOG_CHECK_SYNTH must be full or quick, got {SYNTH!r}")
    sys.exit(2)

def run(cmd, log, limit=900):
    """Runs cmd in DIR; returns (exit code, combined output) and keeps the output in build/."""
    try:
        p = subprocess.run(cmd, cwd=dir_, capture_output=True, text=True, timeout=limit)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = f"timed out after {limit} s", 124
    open(os.path.join(build, log), "w").write(out)
    return rc, out

def first(lines, pat):
    return next((l for l in lines.splitlines() if re.search(pat, l)), "")

def yosys_stat(name, script, kind):
    """Runs a yosys script that writes build/<module>.<kind>.json (stat -json)."""
    stat = os.path.join(build, f"{name}.{kind}.json")
    if os.path.exists(stat):
        os.remove(stat)  # a failed run must not read the previous statistics
    rc, out = run(["yosys", "-q", "-p", script], f"{name}.{kind}.log")
    if rc != 0 or not os.path.exists(stat):
        return None, first(out, r"ERROR") or f"yosys exit {rc}"
    try:
        return json.load(open(stat))["design"]["num_cells_by_type"], None
    except (ValueError, KeyError) as e:  # a yosys whose stat -json is malformed: a failure, not a crash
        return None, f"unreadable {kind} statistics ({e})"

def check(m):
    """All checks of one module: (summary line, report row, failures)."""
    name, f = m["name"], m["file"]
    notes, failures = [], []
    def fail(why):
        failures.append(f"{name}: {why}")
        notes.append(f"FAIL {why}")

    # 1. Lint: clean with the waivers; without them only waived rules.
    lint = ["verilator", "--lint-only", "-Wall", "--top-module", name]
    rc, out = run(lint + [waivers, f], f"{name}.lint.log")
    if rc != 0 or "%Warning" in out or "%Error" in out:
        fail("lint: " + (first(out, r"%(Warning|Error)") or f"verilator exit {rc}"))
    else:
        _, raw = run(lint + [f], f"{name}.lint-raw.log")
        rules = set(re.findall(r"%Warning-([A-Z0-9_]+)", raw))
        if rules - waived:
            fail("lint: rules fire that the waiver file lacks: " + ", ".join(sorted(rules - waived)))
        else:
            notes.append("lint ok")

    # 2./3. Co-simulation and wave diff.
    c = m.get("cosim")
    if c:
        tb, vvp = f"tb_{name}", os.path.join("build", f"tb_{name}.vvp")
        if os.path.exists(os.path.join(dir_, c["icarus_vcd"])):
            os.remove(os.path.join(dir_, c["icarus_vcd"]))  # never diff a previous run's dump
        rc, out = run(["iverilog", "-g2012", "-o", vvp, "-s", tb, c["testbench"], f], f"{name}.iverilog.log")
        if rc != 0:
            fail("iverilog: " + (first(out, r"error") or f"exit {rc}"))
        else:
            rc, out = run(["vvp", "-n", vvp], f"{name}.vvp.log")
            if rc == 0 and f"PASS {name} " in out:
                notes.append(f"cosim PASS {c['cycles']} cycles")
                rc, out = run(wave_cmd + ["wave", "diff", c["rust_vcd"], c["icarus_vcd"]], f"{name}.wavediff.log")
                if rc == 0 and out.startswith("same"):
                    notes.append("wave same")
                else:
                    fail("wave diff: " + " ".join(out.split()))
            else:
                fail("cosim: " + (first(out, r"MISMATCH") or first(out, r"(?i)error|fatal") or f"vvp exit {rc}, no PASS"))
    else:
        notes.append("no co-sim")

    # 4. Synthesis. VERILOG_CHECK_SYNTH=quick (the CI test) elaborates only: yosys reads the
    # file, builds the hierarchy, lowers processes and `check -assert` fails on multiple
    # drivers, combinational loops or undriven wires; the counts and Fmax come from the full
    # flow (the default), which takes minutes on the tops.
    row = {"module": name, "block": m["block"], "top": m["top"], "params": m["params"]}
    if SYNTH == "quick":
        st, err = yosys_stat(name, f"read_verilog {f}; hierarchy -check -top {name}; proc; flatten; opt_clean; check -assert; "
                             f"tee -q -o build/{name}.elab.json stat -json", "elab")
        if st is None:
            fail("yosys elaboration: " + err)
        else:
            row.update({"synth": "quick", "rtlil_cells": sum(st.values())})
            notes.append(f"yosys elaboration ok ({row['rtlil_cells']} RTLIL cells; quick: no synth)")
        return f"{'FAIL' if failures else 'ok  '} {name}: " + ", ".join(notes), row, failures
    gen, err = yosys_stat(name, f"read_verilog {f}; synth -flatten -top {name}; tee -q -o build/{name}.generic.json stat -json",
                          "generic")
    ice, err2 = yosys_stat(name, f"read_verilog {f}; synth_ice40 -top {name} -json build/{name}.ice40.netlist.json; "
                           f"tee -q -o build/{name}.ice40.json stat -json", "ice40")
    if gen is None or ice is None:
        fail("yosys: " + (err or err2))
    else:
        count = lambda d, pred: sum(n for t, n in d.items() if pred(t))
        row.update({
            "generic_cells": sum(gen.values()),
            "generic_ffs": count(gen, lambda t: "DFF" in t),
            "ice40_lut4": count(ice, lambda t: t == "SB_LUT4"),
            "ice40_ram40_4k": count(ice, lambda t: t.startswith("SB_RAM40_4K")),
            "ice40_carry": count(ice, lambda t: t == "SB_CARRY"),
            "ice40_dff": count(ice, lambda t: t.startswith("SB_DFF")),
        })
        fmax, note = None, NO_FMAX
        # The HX8K has 7680 logic cells and the ct256 package 206 IOs: a design that cannot
        # fit gets its reason instead of a placer run that only fails after minutes.
        io_bits = sum(p_["width"] for p_ in m["ports"])
        if nextpnr and max(row["ice40_lut4"], row["ice40_dff"]) > 7680:
            note = f"n/a ({max(row['ice40_lut4'], row['ice40_dff'])} LUT4/DFF > HX8K's 7680)"
        elif nextpnr and io_bits > 206:
            note = f"n/a ({io_bits} IO bits > ct256's 206)"
        elif nextpnr:
            rc, out = run([nextpnr, "--hx8k", "--package", "ct256", "--seed", "1", "--freq", "100", "--timing-allow-fail",
                           "--json", os.path.join("build", f"{name}.ice40.netlist.json")], f"{name}.nextpnr.log",
                          NEXTPNR_SECONDS)
            freqs = re.findall(r"Max frequency for clock '([^']*)': ([0-9.]+) MHz", out)
            if rc == 124:
                note = f"n/a (nextpnr over {NEXTPNR_SECONDS} s)"
            elif rc != 0:
                note = f"n/a (nextpnr exit {rc})"
            elif not freqs:
                note = "n/a (no clocked path)"
            else:
                # nextpnr reports pre- and post-route; the last report per clock is post-route.
                last = {}
                for clk, mhz in freqs:
                    last[clk] = float(mhz)
                fmax = min(last.values())
                note = f"{fmax:.1f} MHz (nextpnr-ice40 hx8k)"
        row.update({"fmax_mhz": fmax, "fmax": note})
        notes.append(f"yosys {row['generic_cells']} cells {row['generic_ffs']} FF | ice40 {row['ice40_lut4']} LUT4 "
                     f"{row['ice40_ram40_4k']} BRAM {row['ice40_carry']} carry {row['ice40_dff']} DFF | Fmax {note}")
    return f"{'FAIL' if failures else 'ok  '} {name}: " + ", ".join(notes), row, failures


# Modules are independent: check them in parallel (VERILOG_CHECK_JOBS, default one per core);
# the lines print in manifest order.
rows, failures = [], []
jobs = int(os.environ.get("VERILOG_CHECK_JOBS", "0")) or os.cpu_count() or 1
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for line, row, fails in pool.map(check, manifest["modules"]):
        print(line, flush=True)
        rows.append(row)
        failures += fails

json.dump({"generator": manifest["generator"], "modules": rows}, open(os.path.join(dir_, "yosys-report.json"), "w"), indent=2)
hdr = ["module", "block", "params", "top", "generic cells", "generic FFs", "ice40 LUT4", "ice40 RAM40_4K",
       "ice40 carry", "ice40 DFF", "Fmax (ice40 hx8k)"]
md = ["# Yosys report", "", f"Generated by scripts/verilog-check.sh from {manifest['generator']}.", "",
      "| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
for r in rows:
    p = ", ".join(f"{k}={v}" for k, v in r["params"].items())
    vals = [r["module"], r["block"], p, "yes" if r["top"] else "no"] + [
        str(r.get(k, "-")) for k in ("generic_cells", "generic_ffs", "ice40_lut4", "ice40_ram40_4k", "ice40_carry", "ice40_dff", "fmax")]
    md.append("| " + " | ".join(vals) + " |")
open(os.path.join(dir_, "yosys-report.md"), "w").write("\n".join(md) + "\n")

if failures:
    print(f"verilog-check: FAILED {len(failures)} check(s) in {dir_}:")
    for f_ in failures:
        print(f"  {f_}")
    sys.exit(1)
print(f"verilog-check: all {len(rows)} module(s) passed (lint, co-sim, wave diff, yosys); report in {dir_}/yosys-report.md")
PY
