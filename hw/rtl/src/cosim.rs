//! Generic Verilog co-simulation: a recorded port trace of a rust-hdl block, and everything
//! made from it (issue 8).
//!
//! A [`PortTrace`] is what the Rust model did, port by port, cycle by cycle. From it
//! [`PortTrace::write_cosim`] writes, for module `M`:
//! * `M.stim.hex` / `M.expect.hex`: `$readmemh` files, one packed word per cycle (the inputs,
//!   resp. the outputs, concatenated in port order, first port in the most significant bits);
//! * `tb_M.v`: a self-checking Icarus testbench that instantiates the exported `M`, applies
//!   stimulus word i in cycle i, compares every output with `!==` against expect word i, stops
//!   at the first mismatch with `MISMATCH cycle C port P expected X got Y` and `$fatal`, prints
//!   `PASS M <cycles> cycles` at the end, and dumps `M.icarus.vcd`;
//! * `M.rust.vcd`: the same trace written with the project's wave writer, so that
//!   `waferstream wave diff M.rust.vcd M.icarus.vcd` says `same` exactly when the Verilog
//!   behaves like the Rust model, and names the first differing port and time otherwise.
//!
//! # Cycle convention
//! Cycle i: the clock is low; `inputs[i]` are applied; combinational logic settles;
//! `outputs[i]` are sampled; then the clock rises (registers take their next state). The
//! clock is not in `inputs` (it is implied by the cycle index); `reset` is an ordinary input.
//! Registered outputs seen in cycle i are therefore the state after the edge of cycle i-1.
//!
//! # Why the waveforms line up
//! [`waves::diff`] compares by full dotted signal name, width, timescale and time. Both files
//! hold one scope `tb_M.probe` with one signal per port (clock excluded), 1 ps timescale and
//! cycle i at time `i * PERIOD_PS`. In the testbench the probe is a set of registers that
//! follow the ports only while `sample_en` is high, i.e. from the falling edge at `i * PERIOD_PS`
//! (where inputs i are applied) up to the rising edge at `i * PERIOD_PS + PERIOD_PS / 2`, so
//! their final value at time `i * PERIOD_PS` is the settled cycle-i value and registered
//! outputs that change at the rising edge show up at the next cycle's time, as in the trace.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use rust_hdl::prelude::*;
use serde::{Deserialize, Serialize};

use crate::export::{ports_of, PortDir, PortInfo};
use crate::RtlError;

/// Clock period of the co-simulation waveforms, in ps (the wave writer's timescale is 1 ps).
/// 1 GHz: round numbers in a viewer (cycle i at `i` ns).
pub const PERIOD_PS: u64 = 1000;

/// Scope of the probe signals under the testbench module in both VCDs.
pub const PROBE_SCOPE: &str = "probe";

/// Ports and values of one recorded run of a block. Every port is at most 64 bits wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortTrace {
    /// Exported Verilog module name (the testbench is `tb_<module>`).
    pub module: String,
    /// Input ports in declaration order, `clock` excluded.
    pub inputs: Vec<PortInfo>,
    /// Output ports in declaration order.
    pub outputs: Vec<PortInfo>,
    pub cycles: Vec<CycleIo>,
}

/// One cycle of a [`PortTrace`]: input values applied and output values sampled (see the
/// module doc for the order), in the order of `PortTrace::inputs` / `outputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleIo {
    pub inputs: Vec<u64>,
    pub outputs: Vec<u64>,
}

/// The co-simulation files of one module, relative to the export directory (an entry of
/// `manifest.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CosimFiles {
    /// Cycles in the trace (and in the testbench run).
    pub cycles: usize,
    /// Seed of the recorder's stimulus.
    pub seed: u64,
    /// `$readmemh` stimulus, one packed input word per cycle.
    pub stim: String,
    /// `$readmemh` expected outputs, one packed output word per cycle.
    pub expect: String,
    /// Self-checking Icarus testbench (top module `tb_<module>`).
    pub testbench: String,
    /// The Rust trace as VCD (wave writer).
    pub rust_vcd: String,
    /// The VCD the testbench writes when run in the export directory.
    pub icarus_vcd: String,
    /// The cocotb test replaying the same vectors (`test_<module>.py`; run by the export's
    /// `run_cocotb.py`).
    pub cocotb: String,
}

impl CosimFiles {
    /// File names for `module` (they do not depend on the trace contents).
    pub fn of(module: &str, cycles: usize, seed: u64) -> Self {
        CosimFiles {
            cycles,
            seed,
            stim: format!("{module}.stim.hex"),
            expect: format!("{module}.expect.hex"),
            testbench: format!("tb_{module}.v"),
            rust_vcd: format!("{module}.rust.vcd"),
            icarus_vcd: format!("{module}.icarus.vcd"),
            cocotb: format!("test_{module}.py"),
        }
    }
}

/// Records a trace of `uut` over `cycles` cycles by driving the rust-hdl model directly
/// (rust-hdl's settle loop, no simulator threads).
///
/// Per cycle: `drive(cycle, &mut uut)` sets the inputs' `.next` (a block whose inputs answer
/// its outputs combinationally may call [`settle`] and read outputs first); then the model
/// settles, every top-level port is read through rust-hdl's probe (so port order and widths
/// are exactly the export's), and the clock pulses. `clock` selects the clock input.
pub fn record<U: Block>(
    module: &str,
    mut uut: U,
    cycles: usize,
    clock: fn(&mut U) -> &mut Signal<In, Clock>,
    mut drive: impl FnMut(usize, &mut U),
) -> Result<PortTrace, RtlError> {
    let err = |detail: String| RtlError::Trace {
        module: module.to_string(),
        detail,
    };
    uut.connect_all();
    let ports = ports_of(&uut);
    if let Some(p) = ports.iter().find(|p| p.width > 64) {
        return Err(err(format!(
            "port {} is {} bits wide (max 64)",
            p.name, p.width
        )));
    }
    if let Some(p) = ports.iter().find(|p| p.direction == PortDir::Inout) {
        return Err(err(format!("port {} is inout (not supported)", p.name)));
    }
    let is_input = |p: &PortInfo| p.direction == PortDir::Input && p.name != CLOCK;
    let inputs: Vec<PortInfo> = ports.iter().filter(|p| is_input(p)).cloned().collect();
    let outputs: Vec<PortInfo> = ports
        .iter()
        .filter(|p| p.direction == PortDir::Output)
        .cloned()
        .collect();
    let mut trace = PortTrace {
        module: module.to_string(),
        inputs,
        outputs,
        cycles: Vec::with_capacity(cycles),
    };
    for cycle in 0..cycles {
        drive(cycle, &mut uut);
        settle(&mut uut).map_err(|d| err(format!("cycle {cycle}: {d}")))?;
        let values = port_values(&uut).map_err(|d| err(format!("cycle {cycle}: {d}")))?;
        let mut io = CycleIo {
            inputs: vec![],
            outputs: vec![],
        };
        for (p, v) in ports.iter().zip(values) {
            if is_input(p) {
                io.inputs.push(v);
            } else if p.direction == PortDir::Output {
                io.outputs.push(v);
            }
        }
        trace.cycles.push(io);
        clock(&mut uut).next = true.into();
        settle(&mut uut).map_err(|d| err(format!("cycle {cycle} rising edge: {d}")))?;
        clock(&mut uut).next = false.into();
        settle(&mut uut).map_err(|d| err(format!("cycle {cycle} falling edge: {d}")))?;
    }
    Ok(trace)
}

/// Name of the clock port (S3); it is implied by the cycle index, never traced.
const CLOCK: &str = "clock";

/// Settles combinational logic after inputs changed (rust-hdl's fixpoint loop, 100 passes).
pub fn settle<U: Block>(uut: &mut U) -> Result<(), String> {
    if simulate(uut, 100) {
        Ok(())
    } else {
        Err("combinational logic did not converge in 100 passes".into())
    }
}

/// Current values of the top-level ports, in `ports_of` order. x/z is an error: a trace
/// is two-valued (the Verilog side compares with `!==`, so an x there fails anyway).
fn port_values<U: Block>(uut: &U) -> Result<Vec<u64>, String> {
    struct ValueProbe {
        depth: usize,
        values: Vec<u64>,
        bad: Option<String>,
    }
    impl Probe for ValueProbe {
        fn visit_start_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth += 1;
        }
        fn visit_end_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth -= 1;
        }
        fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
            // Same selection as `ports_of`, so the two lists line up.
            if self.depth != 1 || !crate::export::is_port(signal.kind()) {
                return;
            }
            let bits: Vec<String> = match signal.vcd() {
                VCDValue::Single(v) => vec![format!("{v:?}")],
                VCDValue::Vector(v) => v.iter().map(|b| format!("{b:?}")).collect(),
                _ => {
                    self.bad
                        .get_or_insert(format!("port {name} is not a bit vector"));
                    vec![]
                }
            };
            let mut value = 0u64;
            for b in &bits {
                // vcd::Value's Debug names: V0, V1, X, Z (MSB first).
                value = value.wrapping_shl(1)
                    | match b.as_str() {
                        "V1" => 1,
                        "V0" => 0,
                        _ => {
                            self.bad.get_or_insert(format!("port {name} is {b}"));
                            0
                        }
                    };
            }
            self.values.push(value);
        }
    }
    let mut probe = ValueProbe {
        depth: 0,
        values: vec![],
        bad: None,
    };
    uut.accept("top", &mut probe);
    match probe.bad {
        Some(b) => Err(b),
        None => Ok(probe.values),
    }
}

/// Packs `values` (one per port, in port order) into one hex word: first port in the most
/// significant bits, total width rounded up to whole hex digits.
fn pack(ports: &[PortInfo], values: &[u64]) -> String {
    let total: usize = ports.iter().map(|p| p.width).sum();
    let digits = total.div_ceil(4).max(1);
    let mut bits = vec![false; digits * 4 - total];
    for (p, &v) in ports.iter().zip(values) {
        bits.extend((0..p.width).rev().map(|i| (v >> i) & 1 == 1));
    }
    bits.chunks(4)
        .map(|c| {
            let d = c.iter().fold(0u32, |a, &b| a << 1 | b as u32);
            char::from_digit(d, 16).unwrap()
        })
        .collect()
}

/// Name of a port's probe signal in both VCDs. Ports of array fields are named `x$i` by
/// rust-hdl; Icarus dumps such identifiers escaped (`\x$i`), so the probe uses `x_i` on both
/// sides (the port itself keeps its name).
fn probe_name(port: &str) -> String {
    port.replace('$', "_")
}

/// `[w-1:0] ` for a vector, nothing for a single bit.
fn range(width: usize) -> String {
    if width == 1 {
        String::new()
    } else {
        format!("[{}:0] ", width - 1)
    }
}

impl PortTrace {
    /// Checks the trace is consistent (value counts, widths); every writer relies on it.
    fn check(&self) -> Result<(), RtlError> {
        let err = |detail: String| RtlError::Trace {
            module: self.module.clone(),
            detail,
        };
        if self.cycles.is_empty() {
            return Err(err("no cycles recorded".into()));
        }
        if self.inputs.is_empty() || self.outputs.is_empty() {
            return Err(err(
                "a co-simulated module needs at least one input and one output".into(),
            ));
        }
        for p in self.inputs.iter().chain(&self.outputs) {
            if !(1..=64).contains(&p.width) {
                return Err(err(format!(
                    "port {} width {} outside 1..=64",
                    p.name, p.width
                )));
            }
        }
        for (i, c) in self.cycles.iter().enumerate() {
            if c.inputs.len() != self.inputs.len() || c.outputs.len() != self.outputs.len() {
                return Err(err(format!(
                    "cycle {i}: {} inputs / {} outputs, ports declare {} / {}",
                    c.inputs.len(),
                    c.outputs.len(),
                    self.inputs.len(),
                    self.outputs.len()
                )));
            }
        }
        Ok(())
    }

    /// Writes the stimulus/expect hex files, the testbench and the Rust VCD into `dir` (which
    /// must exist; the exported `<module>.v` is expected next to them). `seed` is recorded in
    /// the returned file list only.
    pub fn write_cosim(&self, dir: &Path, seed: u64) -> Result<CosimFiles, RtlError> {
        self.check()?;
        let files = CosimFiles::of(&self.module, self.cycles.len(), seed);
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            fs::write(&path, text).map_err(|source| RtlError::Io { path, source })
        };
        let hex = |ports: &[PortInfo], pick: fn(&CycleIo) -> &Vec<u64>| {
            let mut s = String::new();
            for c in &self.cycles {
                s.push_str(&pack(ports, pick(c)));
                s.push('\n');
            }
            s
        };
        write(&files.stim, hex(&self.inputs, |c| &c.inputs))?;
        write(&files.expect, hex(&self.outputs, |c| &c.outputs))?;
        write(&files.testbench, self.testbench(&files))?;
        write(&files.cocotb, self.cocotb_test(&files))?;
        self.write_vcd(&dir.join(&files.rust_vcd))?;
        Ok(files)
    }

    /// The probe signals of both VCDs: `tb_<module>.probe.<port>`, inputs then outputs.
    fn probe_decls(&self) -> Vec<waves::SignalDecl> {
        let tb = format!("tb_{}", self.module);
        self.inputs
            .iter()
            .chain(&self.outputs)
            .map(|p| {
                waves::SignalDecl::new([tb.as_str(), PROBE_SCOPE], probe_name(&p.name).as_str(), p.width as u32)
            })
            .collect()
    }

    /// Writes the trace as a VCD with the wave writer (cycle i at `i * PERIOD_PS`).
    pub fn write_vcd(&self, path: &Path) -> Result<(), RtlError> {
        self.check()?;
        let wave = |source| RtlError::Wave {
            path: path.to_path_buf(),
            source,
        };
        let mut w = waves::WaveWriter::create(
            path,
            waves::WaveFormat::Vcd,
            PERIOD_PS,
            &self.probe_decls(),
            &waves::WaveFilter::default(),
        )
        .map_err(wave)?;
        for (i, c) in self.cycles.iter().enumerate() {
            for (sig, &v) in c.inputs.iter().chain(&c.outputs).enumerate() {
                w.change(i as u64, sig, v).map_err(wave)?;
            }
        }
        w.finish(self.cycles.len() as u64).map_err(wave)
    }

    /// Text of the cocotb test `test_<module>.py`: the same vectors and cycle convention as
    /// the Verilog testbench, in Python, so a user can add tests beside the replay.
    pub fn cocotb_test(&self, files: &CosimFiles) -> String {
        let m = &self.module;
        let ports = |ps: &[PortInfo]| ps.iter().map(|p| format!("    (\"{}\", {}),\n", p.name, p.width)).collect::<String>();
        format!(
            r#""""cocotb replay of the Rust model's recorded trace of `{m}` (generated by waferstream-rtl, cosim.rs).

Run from this directory: `python3 run_cocotb.py {m}` (Icarus; `pip install cocotb`). The test applies
stimulus word i in cycle i and checks every output against expect word i, with the cycle convention
of tb_{m}.v: the clock falls at i*PERIOD, inputs i are applied, outputs are compared a quarter
period later, the clock rises at half the period. Add your own `@cocotb.test()` functions below;
`words()` unpacks any of the hex files.
"""
import os

import cocotb
from cocotb.triggers import Timer

MODULE = "{m}"
CYCLES = {cycles}
PERIOD_PS = {period}
STIM = "{stim}"
EXPECT = "{expect}"
# (port, width) in stimulus/expect word order: the first port in the most significant bits.
INPUTS = [
{inputs}]
OUTPUTS = [
{outputs}]
HERE = os.path.dirname(os.path.abspath(__file__))


def words(name, ports):
    """The rows of a $readmemh file as {{port: value}} dicts."""
    total = sum(w for _, w in ports)
    rows = []
    with open(os.path.join(HERE, name)) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            v = int(line, 16)
            row, shift = {{}}, total
            for p, w in ports:
                shift -= w
                row[p] = (v >> shift) & ((1 << w) - 1)
            rows.append(row)
    return rows


def port(dut, name):
    # rust-hdl names array ports `x$i`: reach them by their exact identifier.
    return dut._id(name, extended=False)


@cocotb.test()
async def replay_rust_trace(dut):
    """Every output of every cycle equals the Rust model's."""
    stim, expect = words(STIM, INPUTS), words(EXPECT, OUTPUTS)
    assert len(stim) == CYCLES and len(expect) == CYCLES, "vector files do not match CYCLES"
    clock = port(dut, "clock")
    for i in range(CYCLES):
        clock.value = 0
        for p, _ in INPUTS:
            port(dut, p).value = stim[i][p]
        await Timer(PERIOD_PS // 4, units="ps")
        for p, _ in OUTPUTS:
            got = port(dut, p).value
            assert got.is_resolvable, f"cycle {{i}} port {{p}}: X/Z ({{got.binstr}})"
            assert int(got) == expect[i][p], f"MISMATCH cycle {{i}} port {{p}} expected {{expect[i][p]:#x}} got {{int(got):#x}}"
        await Timer(PERIOD_PS // 4, units="ps")
        clock.value = 1
        await Timer(PERIOD_PS // 2, units="ps")
    dut._log.info("PASS %s %d cycles", MODULE, CYCLES)
"#,
            cycles = self.cycles.len(),
            period = PERIOD_PS,
            stim = files.stim,
            expect = files.expect,
            inputs = ports(&self.inputs),
            outputs = ports(&self.outputs),
        )
    }

    /// Text of the self-checking testbench `tb_<module>` (see the module doc for the timing).
    pub fn testbench(&self, files: &CosimFiles) -> String {
        let m = &self.module;
        let width = |ports: &[PortInfo]| ports.iter().map(|p| p.width).sum::<usize>();
        let (sw, ew) = (width(&self.inputs), width(&self.outputs));
        let cat = |prefix: &str, ports: &[PortInfo]| {
            ports
                .iter()
                .map(|p| format!("{prefix}{}", p.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut t = String::new();
        let _ = writeln!(
            t,
            "// tb_{m}: generated by waferstream-rtl (cosim.rs) from a {cycles}-cycle trace of the Rust model.\n\
             // Run in the export directory: iverilog -g2012 -o tb_{m}.vvp -s tb_{m} tb_{m}.v {m}.v && vvp -n tb_{m}.vvp\n\
             // Cycle i: falling edge at i*PERIOD, inputs i applied, outputs compared at +PERIOD/4,\n\
             // rising edge at +PERIOD/2. The probe scope follows the ports while the clock is low.\n\
             `timescale 1ps/1ps\n\
             module tb_{m};\n\
             \x20   localparam integer CYCLES = {cycles};\n\
             \x20   localparam integer PERIOD = {PERIOD_PS};\n\
             \x20   reg clock = 1'b0;\n\
             \x20   reg sample_en = 1'b0;\n\
             \x20   reg [{sw1}:0] stim_mem [0:CYCLES-1];\n\
             \x20   reg [{ew1}:0] exp_mem [0:CYCLES-1];\n\
             \x20   integer cycle;",
            cycles = self.cycles.len(),
            sw1 = sw - 1,
            ew1 = ew - 1,
        );
        for p in &self.inputs {
            let _ = writeln!(t, "    reg {}in_{};", range(p.width), p.name);
        }
        for p in &self.outputs {
            let _ = writeln!(t, "    wire {}out_{};", range(p.width), p.name);
            let _ = writeln!(t, "    reg {}exp_{};", range(p.width), p.name);
        }
        let conns: Vec<String> = std::iter::once(".clock(clock)".to_string())
            .chain(self.inputs.iter().map(|p| format!(".{0}(in_{0})", p.name)))
            .chain(
                self.outputs
                    .iter()
                    .map(|p| format!(".{0}(out_{0})", p.name)),
            )
            .collect();
        let _ = writeln!(
            t,
            "    {m} dut(\n        {}\n    );",
            conns.join(",\n        ")
        );
        // Probe: named generate scope, so the dump is `tb_<m>.probe.<port>` like the Rust VCD.
        let _ = writeln!(t, "    generate if (1) begin : {PROBE_SCOPE}");
        for p in self.inputs.iter().chain(&self.outputs) {
            let _ = writeln!(t, "        reg {}{};", range(p.width), probe_name(&p.name));
        }
        // Testbench nets by full name: a probe register named like a port must not shadow them.
        let _ = writeln!(t, "        always @(*) if (tb_{m}.sample_en) begin");
        for p in &self.inputs {
            let _ = writeln!(t, "            {} = tb_{m}.in_{};", probe_name(&p.name), p.name);
        }
        for p in &self.outputs {
            let _ = writeln!(t, "            {} = tb_{m}.out_{};", probe_name(&p.name), p.name);
        }
        let _ = writeln!(t, "        end\n    end endgenerate");
        let _ = writeln!(
            t,
            "    initial begin\n\
             \x20       $readmemh(\"{stim}\", stim_mem);\n\
             \x20       $readmemh(\"{expect}\", exp_mem);\n\
             \x20       $dumpfile(\"{vcd}\");\n\
             \x20       $dumpvars(1, tb_{m}.{PROBE_SCOPE});\n\
             \x20       for (cycle = 0; cycle < CYCLES; cycle = cycle + 1) begin\n\
             \x20           clock = 1'b0;\n\
             \x20           sample_en = 1'b1;\n\
             \x20           {{{ins}}} = stim_mem[cycle];\n\
             \x20           {{{exps}}} = exp_mem[cycle];\n\
             \x20           #(PERIOD/4);",
            stim = files.stim,
            expect = files.expect,
            vcd = files.icarus_vcd,
            ins = cat("in_", &self.inputs),
            exps = cat("exp_", &self.outputs),
        );
        for p in &self.outputs {
            let _ = writeln!(
                t,
                "            if (out_{0} !== exp_{0}) begin\n\
                 \x20               $display(\"MISMATCH cycle %0d port {0} expected %0h got %0h\", cycle, exp_{0}, out_{0});\n\
                 \x20               $fatal(1, \"tb_{m}: Verilog differs from the Rust model\");\n\
                 \x20           end",
                p.name
            );
        }
        let _ = writeln!(
            t,
            "            #(PERIOD/4);\n\
             \x20           sample_en = 1'b0;\n\
             \x20           clock = 1'b1;\n\
             \x20           #(PERIOD/2);\n\
             \x20       end\n\
             \x20       $display(\"PASS {m} %0d cycles\", CYCLES);\n\
             \x20       $finish;\n\
             \x20   end\n\
             endmodule"
        );
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, width: usize) -> PortInfo {
        PortInfo {
            name: name.into(),
            direction: PortDir::Input,
            width,
        }
    }

    #[test]
    fn pack_puts_the_first_port_in_the_msbs() {
        let ports = [port("a", 1), port("b", 3)];
        assert_eq!(pack(&ports, &[1, 0b011]), "b");
        let ports = [port("reset", 1), port("req", 5), port("fire", 1)];
        // 1 | 10101 | 0 = 0b1101010 -> two digits, one pad bit.
        assert_eq!(pack(&ports, &[1, 0b10101, 0]), "6a");
        let ports = [port("w", 64), port("b", 1)];
        assert_eq!(pack(&ports, &[u64::MAX, 1]), "1ffffffffffffffff");
    }
}
