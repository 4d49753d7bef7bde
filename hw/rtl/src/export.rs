//! Verilog export of the registered block configurations (S3: per block or composed top,
//! never the wafer top), and the registry other blocks plug into.
//!
//! `export_all(dir, filter)` writes, for each selected module, `<module>.v` and, when its block
//! registered a recorder, the co-simulation files of [`crate::cosim`] (stimulus/expect hex,
//! self-checking Icarus testbench, the Rust trace as VCD); plus `manifest.json` (per module:
//! name, file, block, top, params, ports, co-sim files) and `verilator_waivers.vlt` (the lint
//! waivers for rust-hdl's code generator, each with its reason). The CLI's
//! `export-verilog --out DIR [--block NAME] [--param KEY=VALUE ...]` calls it, and
//! `scripts/verilog-check.sh DIR` checks the result (lint, co-sim, wave diff, yosys).
//!
//! # Registering a block
//! Const generics fix the widths, so a *parameter set* is one monomorphized alias with its
//! constructor. A block module declares one [`BlockDef`] constant and adds it to [`REGISTRY`]:
//!
//! ```ignore
//! pub const EXPORT: BlockDef = BlockDef {
//!     name: "rr_arbiter",
//!     top: false,
//!     domain: ModelDomain::PkgCore,
//!     cosim_cycles: 4096,
//!     sets: &[ParamSet {
//!         module: "rr_arbiter_5",
//!         rust_type: "RrArbiter5Rtl",
//!         params: &[("n", 5)],
//!         ecp5_clock_mhz: 100,
//!         build: || boxed(RrArbiter5Rtl::new(5)),
//!         recorder: Some(|cycles, seed| record_rr_arbiter::<5>("rr_arbiter_5", cycles, seed)),
//!     }],
//! };
//! ```
//!
//! rust-hdl names the top module `top` and each sub-block `top$<field>`; we rename that root
//! to the module's export name (`rr_arbiter_5`, `rr_arbiter_5$ptr_oh`) so several exported
//! files can be read into one FPGA project without module-name clashes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rust_hdl::prelude::*;
use serde::{Deserialize, Serialize};

use crate::cosim::{CosimFiles, PortTrace};
use crate::RtlError;

/// Direction of a top-level port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortDir {
    Input,
    Output,
    Inout,
}

/// Clock domain of the modelled hardware a block runs in. An FPGA prototype runs each domain
/// on one clock, so the domain's prototype clock is the slowest `ecp5_clock_mhz` among its
/// modules (scripts/verilog-check.sh prints it; docs/rtl.md, "Timing closure at the prototype
/// clocks").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelDomain {
    /// The package's core clock (`PkgCfg::core_mhz`): chiplet controller and its parts, IO-die
    /// scheduler, PE array, die router.
    PkgCore,
    /// The package's UCIe adapter clock (`PkgCfg::ucie_mhz`): replay buffer, CRC.
    PkgUcie,
    /// The wafer's one clock: mapping controller, balancer, predictor, Sem-MoE look-up.
    WaferCore,
}

/// One top-level port of an exported module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortInfo {
    pub name: String,
    pub direction: PortDir,
    pub width: usize,
}

/// One exported module (an entry of `manifest.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockInfo {
    /// Verilog module name (also the file stem).
    pub name: String,
    /// File name inside the output directory.
    pub file: String,
    /// Registered block it belongs to (`--block` name); one row per parameter set.
    pub block: String,
    /// A composed top (lint must be clean, co-sim runs >= [`TOP_COSIM_CYCLES`]) vs a leaf block.
    pub top: bool,
    /// The Rust type it was generated from.
    pub rust_type: String,
    /// Configuration values baked into the Verilog (widths, depth): the parameter set.
    pub params: BTreeMap<String, u64>,
    /// Clock domain of the modelled hardware ([`BlockDef::domain`]).
    pub domain: ModelDomain,
    /// Prototype clock the module must close timing at on the ECP5-85F ([`ParamSet::ecp5_clock_mhz`]).
    pub ecp5_clock_mhz: u32,
    /// Top-level ports in declaration order (S3: clock, reset, inputs, outputs).
    pub ports: Vec<PortInfo>,
    /// Co-simulation files, for blocks that registered a recorder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosim: Option<CosimFiles>,
}

/// Contents of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Generator identification, so a stale export can be recognised.
    pub generator: String,
    /// Lint waiver file for `verilator --lint-only -Wall` (relative to the output directory).
    pub verilator_waivers: String,
    pub modules: Vec<BlockInfo>,
}

/// File name of the verilator waiver file written next to the Verilog.
pub const WAIVER_FILE: &str = "verilator_waivers.vlt";

/// Verilator waivers for the generated code. Every line says why it is safe.
pub const VERILATOR_WAIVERS: &str = "\
`verilator_config
// Waivers for rust-hdl 0.46 generated Verilog (waferstream-rtl export). Each is a property of
// the code generator, not of the design; the co-simulation tests check behaviour.
//
// DECLFILENAME: every sub-block becomes its own module (`<top>$<field>`) in the same file, so
// module names cannot all match the file name.
lint_off -rule DECLFILENAME
//
// WIDTH, in the IO-die scheduler's file (and its sorter's) only: rust-hdl writes every Rust
// integer literal as a 32-bit constant (`state == 32'h7`, `ptr + 32'h1`, `x = 32'h0`), every
// `bit_cast::<W, N>(x)` as `x & W'h<mask>` and `replace_bit` as `(1'b1) << i`, so each literal
// or cast in a narrower or wider context warns. Verilog sizes them by context, which is
// Bits<N>'s wrapping arithmetic; every warning form was audited (docs/rtl.md, Lint) and the
// co-simulation compares every output bit against the Rust model.
lint_off -rule WIDTH -file \"*iodie_scheduler_*.v\"
lint_off -rule WIDTH -file \"*bitonic_sorter_*.v\"
//
// WIDTH, in the ring buffer's file (ring_buffer_*): the same literal forms only — `x = 32'h0`
// defaults, `occ_r + 32'h1` / `idx + 32'h1` in the unrolled counters and priority encoders
// (8-bit values that stay below S <= 64, so no wrap), `slot + 32'h1` for the tail (8 bits,
// wraps at S by the comparison before it) and `(1'b1) << slot` from `replace_bit`.
lint_off -rule WIDTH -file \"*ring_buffer_*.v\"
// UNOPTFLAT in the same file, on its two scans (`free_scan`/`live_scan`, RingScanRtl): a
// combinational sub-block that the parent's one always block drives and reads, a loop at
// always-block granularity only (as the chiplet's next-hop units).
lint_off -rule UNOPTFLAT -file \"*ring_buffer_*.v\" -match \"*_scan$*\"
//
// UNUSEDSIGNAL on the sorter's `desc` bit P-1: the direction mask is indexed by the low lane
// of each comparator, and the top lane is never a low lane.
lint_off -rule UNUSEDSIGNAL -file \"*\" -match \"*'desc'*\"
//
// The chiplet controller's file (chiplet_ctrl_*): WIDTH for the same literal, cast and
// replace_bit forms, plus dynamic bit selects whose index is wider than log2 of the vector
// (`granted[te_n]`: rust-hdl's `get_bit(x.index())` with a 16-bit expert id into an E-entry
// table; in range by construction, and the Rust model would panic out of range). UNSIGNED:
// `lp < 0` is the q = 0 step of the unrolled ring-position search `index() < q`, constant
// false in Rust too. UNOPTFLAT on the next-hop units `nhd`/`nhp`: combinational sub-blocks
// that the parent's one always block drives and reads, a loop at always-block granularity
// only (as in the router). UNUSEDSIGNAL on `te_n`: the expert-id bits above log2 E.
lint_off -rule WIDTH -file \"*chiplet_ctrl_*.v\"
lint_off -rule UNSIGNED -file \"*chiplet_ctrl_*.v\"
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.nh?$*\"
// The same for its oldest/newest pickers (`sel_*`, AgePickerRtl), ring scans (`sc_*`,
// RingScanRtl) and the Rule-5 tag FIFO (`aq`, TagFifoRtl: `pop` is computed from its
// combinational `len_in`, the ungranted count and `len_next` are read back): sub-blocks
// between the parent's stages.
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.sel_*$*\"
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.sc_*$*\"
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.aq$*\"
lint_off -rule UNUSEDSIGNAL -file \"*chiplet_ctrl_*.v\" -match \"*'te_n'*\"
//
// WIDTH in the chiplet's Rule-5 tag FIFO file (tag_fifo_*): the literal forms (`x = 32'h0`,
// `n + 32'h1` / `n - 32'h1` on the 8-bit length, which stays <= Q + 1 <= 65) and the
// `granted[el_e]` select with a 16-bit expert id into the E-bit vector (in range by
// construction, as in the controller).
lint_off -rule WIDTH -file \"*tag_fifo_*.v\"
//
// UNOPTFLAT, router control only: rust-hdl emits one always block per module, so an allocator
// whose arbiter `fire` inputs depend on other arbiters' grants (iSLIP: the grant pointer moves
// only when its grant is accepted) forms a loop at always-block granularity although no signal
// depends on itself (`grant` never reads `fire`). A Verilator scheduling note, not a logic
// loop; the co-simulation checks the behaviour.
lint_off -rule UNOPTFLAT -file \"*router_ctrl_*.v\"
// The same allocator inside the full router (`router_v*`), and only there: the loop is in the
// `ctrl` sub-block (router_ctrl) and its arbiters.
lint_off -rule UNOPTFLAT -file \"*router_v*_d*.v\" -match \"*ctrl*\"
// UNUSEDSIGNAL on the full router's `fy` locals: each is a buffer front shifted down to its
// dest_y field, of which only the low coord_bits are read (the other fields are read from the
// front itself); a shift instead of a part-select with a generic base avoids WIDTH.
lint_off -rule UNUSEDSIGNAL -file \"*router_v*_d*.v\" -match \"*'fy$*\"
//
// UNUSEDSIGNAL, in the mapping controller's file (mapping_ctrl_*), on its 16 x 16 products
// p_* only: rust-hdl types a 16 x 16-bit product as 32 bits, and the block uses its low 16
// (the table addresses are below 2^16: at most 256 dies, checked by the stand-in's host-side
// bounds; the shape unit's ring-grid terms are kept mod 2^16, as the 16-bit registers they
// equal), so the upper half is left unused.
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'p_*\"
// UNUSEDSIGNAL on the shape unit's divider outputs each instance does not read: `n / w` and
// `cols / w` are read from the registers (`q`, `r`) after their 16 steps, `rows / (n / w)` from
// its last step (`q_next`, and `z_next` for its remainder being 0) in the candidate's last
// cycle, of whose registers only the partial quotient's bit 0 is read — one DivRtl, both views.
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'div_n$?_next'\"
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'div_c$?_next'\"
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'div_r$?'\"
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'div_r$r_next'\"
// WIDTH on its LUT-RAMs (`ring_inv`, `slot_of`, `group_ram`, `rank_ram`: AsyncRam::with_words(D), `lutram.rs`):
// D words addressed by the 8 bits of the 256-entry build; the block writes and reads
// addresses below D only (wider write addresses are masked off by the parent).
lint_off -rule WIDTH -file \"*mapping_ctrl_*.v\" -match \"*Bit extraction of array*\"
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'read_address'*\"
lint_off -rule UNUSEDSIGNAL -file \"*mapping_ctrl_*.v\" -match \"*'write_address'*\"
// UNOPTFLAT on the same four: the one always block computes their read addresses from
// registers (`o_q`, `ps_q`) and reads `read_data` back (as the IO-die scheduler's EIT below).
lint_off -rule UNOPTFLAT -file \"*mapping_ctrl_*.v\" -match \"*.slot_of$*\"
lint_off -rule UNOPTFLAT -file \"*mapping_ctrl_*.v\" -match \"*.ring_inv$*\"
lint_off -rule UNOPTFLAT -file \"*mapping_ctrl_*.v\" -match \"*.group_ram$*\"
lint_off -rule UNOPTFLAT -file \"*mapping_ctrl_*.v\" -match \"*.rank_ram$*\"
//
// The PE array's file (pe_array_*): WIDTH for rust-hdl's literal and cast forms only — `x =
// 32'h0` register defaults on 8/16/24/2-bit registers, `gi + 32'h1` on the 2-bit GEMM scan
// index (counts to 3, no wrap), the operand sign extensions `(a_left & 16'hffff) | ext8`
// (8 -> 16 bits), the product's `((prod & 16'hffff) & 32'hffffffff) | ext16` (low 16 bits
// -> 32) and the stream's `cur_st & 32'hffffffff` (24 -> 32): each zero-extends and is then
// sign-extended or added at the wider width, which is the Rust model's arithmetic (no `~`
// inside a widening cast; audited in docs/rtl.md, PE array). UNUSEDSIGNAL on the systolic
// pass-through outputs `a_out` / `b_out` of the PEs: the last column's activations and the
// bottom row's B/weights have no neighbour to go to.
lint_off -rule WIDTH -file \"*pe_array_*.v\"
lint_off -rule UNUSEDSIGNAL -file \"*pe_array_*.v\" -match \"*'pe$*$a_out'*\"
lint_off -rule UNUSEDSIGNAL -file \"*pe_array_*.v\" -match \"*'pe$*$b_out'*\"
//
// UNOPTFLAT in the chiplet controller's file on its reload list (`rq`, ReloadListRtl: the
// escape's append is computed from its combinational `found` / `any_granted`) and load
// sequencer (`ls`, LoadSeqRtl: its `take` is computed from the reload list's and the Rule-5
// FIFO's answers, its `own_granted` feeds the escape): sub-blocks between the parent's
// stages, as `aq` above. (The Rule-5 report `fr` needs none: nothing it drives feeds back.)
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.rq$*\"
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.ls$*\"
// The same for its age matrix (`am`, AgeMatrixRtl): its `age_e` rows feed the pickers whose
// PE pick the parent feeds back as `pick`, answered in `age_p` (registered state in between
// only at the edge).
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.am$*\"
// And its tag file (`tg`, SlotTagsRtl): the read ports' slot indices come from the pickers
// and the allocations, and the tags read feed the stages that decide the next write.
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.tg$*\"
// UNUSEDSIGNAL on its read ports' outputs: the DDR landing's read (port 0) needs the expert
// and loader, the PE done's (port 1) the expert only; the unread k / loader muxes are
// removed by synthesis.
lint_off -rule UNUSEDSIGNAL -file \"*chiplet_ctrl_*.v\" -match \"*'tg$rd_*'*\"
// And its per-expert tables (`xt`, ExpertTableRtl): the next-hop lookup of the PE pick is
// indexed by the pick, which the tokens-here bits (`tok_ok_a`) decided.
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.xt$*\"
// And its per-slot state (`ss`, SlotStateRtl): its sets after each stage (`lw1`, `live2`,
// `rx2`, ...) feed the pickers and allocations whose answers come back as the next stage's
// event masks (`victim`, `rx_alloc`, `pick_m`, ...).
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.ss$*\"
// WIDTH in the per-slot state file (slot_state_*): the controller's forms it came from —
// `x = 32'h0` defaults, `cnt + 32'h1` on 8-bit counts below S, `(1'b1) << slot` from
// `replace_bit`, `slot == 32'hN` compares of 8-bit slot indices.
lint_off -rule WIDTH -file \"*slot_state_*.v\"
// And its ring pointers (`rp`, RingAllocRtl): the DDR load's request is decided from the
// free count it answers, and the escape (given back with the final live bits) from its
// `ld_ok`. In the ring pointers' own file (ring_alloc_*): WIDTH for the ring's forms
// (`x = 32'h0`, `cnt + 32'h1` / `slot + 32'h1` on 8-bit values below S, `(1'b1) << slot`),
// UNOPTFLAT on its four scans (`sc_*`, RingScanRtl), as in ring_buffer_*.
lint_off -rule UNOPTFLAT -file \"*chiplet_ctrl_*.v\" -match \"*.rp$*\"
lint_off -rule WIDTH -file \"*ring_alloc_*.v\"
lint_off -rule UNOPTFLAT -file \"*ring_alloc_*.v\" -match \"*.sc_*$*\"
// WIDTH in the per-expert table file (expert_table_*): the controller's forms it came from —
// `x = 32'h0` defaults, `left - 32'h1` on a 16-bit count, `(1'b1) << e` from `replace_bit`,
// and `granted[e]` / `e == 32'hN` with a 16-bit expert id into E entries (in range by
// construction, as in the controller).
lint_off -rule WIDTH -file \"*expert_table_*.v\"
// WIDTH in the chiplet's reload list file (reload_list_*): the literal forms (`x = 32'h0`,
// `n + 32'h1` / `n - 32'h1` on 8-bit counters that stay <= Q + 3, `istar = 32'hff`) and
// `granted[el_e]` with a 16-bit expert id into the E-bit vector (in range by construction,
// as in the controller). (The load sequencer and Rule-5 report files, load_seq_* and
// free_report_*, need no WIDTH waiver: sized constants, as age_picker_*.)
lint_off -rule WIDTH -file \"*reload_list_*.v\"
//
// WIDTH in the NI-Balancer's decision unit and trigger files (ni_balancer_*, ni_trigger*):
// rust-hdl's literal forms only (`x = 32'h0`, `state_q$q == 32'h6`, `n + 32'h1` on 16-bit
// counters that stay below 2^16, `(1'b1) << src` from `replace_bit`), the `bit_cast` masks of
// the 32 x 32 multiplier's partial products, and dynamic bit selects with a 16-bit index
// (`row[src]`: src < E by construction). UNOPTFLAT on their multipliers (`mul`, `lhs_mul`,
// `rhs_mul`, Mul32Rtl): combinational sub-blocks the parent's one always block drives and
// reads, a loop at always-block granularity only (as the ring's scans).
lint_off -rule WIDTH -file \"*ni_balancer_*.v\"
lint_off -rule WIDTH -file \"*ni_trigger*.v\"
lint_off -rule UNOPTFLAT -file \"*ni_balancer_*.v\" -match \"*.mul$*\"
lint_off -rule UNOPTFLAT -file \"*ni_trigger*.v\" -match \"*_mul$*\"
//
// UNOPTFLAT on the asynchronous-read memories (AsyncRam, `lutram.rs`) of the IO-die scheduler
// (its EIT, `eit`) and the Sem-MoE look-up unit (token and n-gram tables `tta_*`, `ttb_*`,
// `ng_*`, their `read_address` / `read_data`): the parent's one always block computes the read
// address from registers only and reads `read_data` back, a loop at always-block granularity
// only (as the sub-blocks above); no address bit depends on the data read.
lint_off -rule UNOPTFLAT -file \"*iodie_scheduler_*.v\" -match \"*.eit$read_data'*\"
lint_off -rule UNOPTFLAT -file \"*semmoe_lut_*.v\" -match \"*$read_*'*\"
";

/// Top-level ports of a block in declaration order (rust-hdl's probe at depth 1).
pub fn ports_of<U: Block + ?Sized>(uut: &U) -> Vec<PortInfo> {
    struct PortProbe {
        depth: usize,
        ports: Vec<PortInfo>,
    }
    impl Probe for PortProbe {
        fn visit_start_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth += 1;
        }
        fn visit_end_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth -= 1;
        }
        fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
            if self.depth != 1 {
                return;
            }
            let Some(direction) = port_dir(signal.kind()) else {
                return;
            };
            self.ports.push(PortInfo {
                name: name.to_string(),
                direction,
                width: signal.bits(),
            });
        }
    }
    let mut probe = PortProbe {
        depth: 0,
        ports: vec![],
    };
    uut.accept("top", &mut probe);
    probe.ports
}

/// Direction of a top-level atom, `None` for anything that is not a port.
fn port_dir(kind: AtomKind) -> Option<PortDir> {
    match kind {
        AtomKind::InputParameter => Some(PortDir::Input),
        AtomKind::OutputParameter | AtomKind::OutputPassthrough => Some(PortDir::Output),
        AtomKind::InOutParameter => Some(PortDir::Inout),
        _ => None,
    }
}

/// Whether a depth-1 atom is a port (the selection `ports_of` and the trace reader share).
pub(crate) fn is_port(kind: AtomKind) -> bool {
    port_dir(kind).is_some()
}

/// Renames rust-hdl's root module `top` (and its sub-modules `top$x`) to `name`.
fn rename_top(verilog: &str, name: &str) -> String {
    // `top` only appears as a module identifier at the start of `module top(` / `top$...`
    // (signal names inside a module never carry the root prefix).
    let mut out = String::with_capacity(verilog.len() + 64);
    for line in verilog.lines() {
        let mut l = line.to_string();
        if let Some(rest) = l.strip_prefix("module top") {
            l = format!("module {name}{rest}");
        }
        if let Some(rest) = l.strip_prefix("endmodule // top") {
            l = format!("endmodule // {name}{rest}");
        }
        // Instantiations: `    top$ptr_oh ptr_oh(` (possibly indented).
        let trimmed = l.trim_start();
        if let Some(rest) = trimmed.strip_prefix("top$") {
            let indent = &l[..l.len() - trimmed.len()];
            l = format!("{indent}{name}${rest}");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Minimum co-simulation length of a composed top: long enough to leave reset, fill the
/// queues and wrap the counters of a scheduler-sized design several times.
pub const TOP_COSIM_CYCLES: usize = 10_000;

/// Longest co-simulation the exporter records (`ExportFilter::cycles`): a million cycles is
/// ~10 MB of hex per module and minutes of Icarus; more is a typo, not a test.
pub const MAX_COSIM_CYCLES: usize = 1_000_000;

/// Seed of the recorders' stimulus unless the filter sets one.
pub const DEFAULT_SEED: u64 = 1;

/// A block's trace recorder: `(cycles, seed) -> trace` of one parameter set, usually a call
/// of [`crate::cosim::record`] with the block's stimulus generator.
pub type Recorder = fn(usize, u64) -> Result<PortTrace, RtlError>;

/// What the exporter needs from a block, object-safe so parameter sets of different
/// (monomorphized) types fit in one registry. Implemented for every rust-hdl [`Block`].
pub trait Exportable {
    /// `connect_all` (required before checks, generation and probing).
    fn connect(&mut self);
    /// rust-hdl's structural checks (connectivity, write-before-read).
    fn check(&self) -> Result<(), String>;
    /// Verilog text with rust-hdl's root name `top`.
    fn verilog(&self) -> String;
    /// Top-level ports in declaration order.
    fn ports(&self) -> Vec<PortInfo>;
}

impl<U: Block> Exportable for U {
    fn connect(&mut self) {
        self.connect_all();
    }
    fn check(&self) -> Result<(), String> {
        check_all(self).map_err(|e| format!("{e:?}"))
    }
    fn verilog(&self) -> String {
        generate_verilog(self)
    }
    fn ports(&self) -> Vec<PortInfo> {
        ports_of(self)
    }
}

/// Boxes a block for [`ParamSet::build`] (a non-capturing closure `|| boxed(X::new(..))`).
pub fn boxed<U: Block + 'static>(uut: U) -> Box<dyn Exportable> {
    Box::new(uut)
}

/// One parameter set of a block: a monomorphized alias, its constructor and its recorder.
#[derive(Debug)]
pub struct ParamSet {
    /// Verilog module name and file stem; unique over the registry.
    pub module: &'static str,
    /// The Rust alias it is built from (for the manifest and the Verilog header).
    pub rust_type: &'static str,
    /// Parameter values; every set of a block has the same keys.
    pub params: &'static [(&'static str, u64)],
    /// Prototype clock, MHz, that this set must close timing at on an LFE5U-85F, speed grade 6
    /// (`scripts/verilog-check.sh` full mode: nextpnr-ecp5 `--freq` and the pass criterion).
    /// 100 where the block meets 100 MHz; below that, a multiple of 5 MHz the block meets
    /// with margin at nextpnr seeds 1-3 (docs/rtl.md, "Timing closure at the prototype
    /// clocks"). Reaching 100 MHz there needs pipelining, which would change the cycle counts
    /// the RTL shares with the CL model.
    pub ecp5_clock_mhz: u32,
    /// Fresh, unconnected instance.
    pub build: fn() -> Box<dyn Exportable>,
    /// Trace recorder; `None` exports the Verilog without co-simulation files.
    pub recorder: Option<Recorder>,
}

/// A registered block: a leaf block or a composed top, with its parameter sets.
#[derive(Debug)]
pub struct BlockDef {
    /// `--block` name, e.g. `rr_arbiter`.
    pub name: &'static str,
    /// A composed top (see [`BlockInfo::top`]).
    pub top: bool,
    /// Clock domain of the modelled hardware the block runs in.
    pub domain: ModelDomain,
    /// Default co-simulation length; tops use at least [`TOP_COSIM_CYCLES`].
    pub cosim_cycles: usize,
    pub sets: &'static [ParamSet],
}

/// Every exported block, in export order. A new block adds its `EXPORT` constant here.
pub const REGISTRY: &[&BlockDef] = &[
    &crate::rr_arbiter::EXPORT,
    &crate::credit_counter::EXPORT,
    &crate::noc::route_compute::EXPORT,
    &crate::noc::router_ctrl::EXPORT,
    &crate::noc::router::EXPORT,
    &crate::pkg::sorter::EXPORT,
    &crate::pkg::iodie::EXPORT,
    &crate::pkg::ucie_replay::EXPORT,
    &crate::pkg::ucie_crc::EXPORT,
    &crate::pkg::ring::EXPORT,
    &crate::pkg::chiplet::EXPORT,
    &crate::pkg::picker::EXPORT,
    &crate::pkg::tag_fifo::EXPORT,
    &crate::wafer::predictor::EXPORT,
    &crate::wafer::semmoe_lut::EXPORT,
    &crate::wafer::mapping::EXPORT,
    &crate::pkg::pe_array::EXPORT,
    &crate::pkg::load_seq::EXPORT,
    &crate::pkg::reload_list::EXPORT,
    &crate::pkg::free_report::EXPORT,
    &crate::wafer::ni_balancer::EXPORT,
    &crate::wafer::ni_trigger::EXPORT,
    &crate::pkg::age_matrix::EXPORT,
    &crate::pkg::slot_tags::EXPORT,
    &crate::pkg::expert_table::EXPORT,
    &crate::pkg::slot_state::EXPORT,
    &crate::pkg::ring_alloc::EXPORT,
];

/// Blocks outside the standard export: the synthesis sweeps (the scheduler's scaling from 4
/// to 16 chiplets and 16 to 128 experts). `export-verilog` without `--block` skips them (their
/// yosys runs take minutes to hours); `--block NAME [--param ...]` selects them like any
/// block, and `scripts/yosys-scaling.sh` synthesizes them.
pub const SWEEP: &[&BlockDef] = &[&crate::pkg::iodie::SWEEP];

/// The standard blocks, then the sweeps: what `--block` may name.
fn named_blocks() -> impl Iterator<Item = &'static BlockDef> {
    REGISTRY.iter().chain(SWEEP.iter()).copied()
}

/// Which modules `export_all` writes and how long they are co-simulated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportFilter {
    /// Registered block name (or one module name); `None` = all blocks.
    pub block: Option<String>,
    /// `KEY=VALUE` selections among the block's parameter sets (needs `block`).
    pub params: Vec<(String, String)>,
    /// Co-simulation cycles instead of each block's default (tests keep runs short).
    pub cycles: Option<usize>,
    /// Stimulus seed instead of [`DEFAULT_SEED`].
    pub seed: Option<u64>,
}

impl ExportFilter {
    /// Parses one `--param KEY=VALUE` argument.
    pub fn parse_param(text: &str) -> Result<(String, String), RtlError> {
        match text.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(RtlError::ParamSyntax(text.to_string())),
        }
    }
}

fn list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The (block, parameter set) pairs `filter` selects, in registry order. Refuses an unknown
/// block, an unknown parameter key or value (naming it and listing what is allowed), and a
/// combination no set has, before anything is written.
pub fn select(
    filter: &ExportFilter,
) -> Result<Vec<(&'static BlockDef, &'static ParamSet)>, RtlError> {
    if let Some(cycles) = filter.cycles {
        if !(1..=MAX_COSIM_CYCLES).contains(&cycles) {
            return Err(RtlError::Cycles {
                cycles,
                max: MAX_COSIM_CYCLES,
            });
        }
    }
    let Some(name) = &filter.block else {
        if let Some((key, _)) = filter.params.first() {
            return Err(RtlError::ParamWithoutBlock { key: key.clone() });
        }
        return Ok(REGISTRY
            .iter()
            .flat_map(|b| b.sets.iter().map(move |s| (*b, s)))
            .collect());
    };
    // A module name selects exactly its set (`--block rr_arbiter_5`).
    if let Some((b, s)) = named_blocks()
        .flat_map(|b| b.sets.iter().map(move |s| (b, s)))
        .find(|(_, s)| s.module == name)
    {
        if let Some((key, _)) = filter.params.first() {
            return Err(RtlError::UnknownParam {
                block: name.clone(),
                key: key.clone(),
                allowed: "none (a module name is one parameter set; use its block name)".into(),
            });
        }
        return Ok(vec![(b, s)]);
    }
    let block = named_blocks()
        .find(|b| b.name == name)
        .ok_or_else(|| RtlError::UnknownBlock {
            name: name.clone(),
            known: list(named_blocks().map(|b| b.name)),
        })?;
    let mut sets: Vec<&ParamSet> = block.sets.iter().collect();
    for (key, value) in &filter.params {
        let mut keys: Vec<&str> = block
            .sets
            .iter()
            .flat_map(|s| s.params.iter().map(|p| p.0))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if !keys.contains(&key.as_str()) {
            return Err(RtlError::UnknownParam {
                block: block.name.into(),
                key: key.clone(),
                allowed: list(keys),
            });
        }
        let mut values: Vec<u64> = block
            .sets
            .iter()
            .flat_map(|s| s.params.iter().filter(|p| p.0 == key).map(|p| p.1))
            .collect();
        values.sort_unstable();
        values.dedup();
        let bad = || RtlError::BadParamValue {
            block: block.name.into(),
            key: key.clone(),
            value: value.clone(),
            allowed: list(&values),
        };
        let v: u64 = value.parse().map_err(|_| bad())?;
        if !values.contains(&v) {
            return Err(bad());
        }
        sets.retain(|s| s.params.iter().any(|p| p.0 == key && p.1 == v));
    }
    if sets.is_empty() {
        let show = |s: &ParamSet| {
            format!(
                "{} ({})",
                s.module,
                list(s.params.iter().map(|(k, v)| format!("{k}={v}")))
            )
        };
        return Err(RtlError::NoParamSet {
            block: block.name.into(),
            wanted: list(filter.params.iter().map(|(k, v)| format!("{k}={v}"))),
            sets: list(block.sets.iter().map(show)),
        });
    }
    Ok(sets.into_iter().map(|s| (block, s)).collect())
}

/// A parameter set prepared for export: its info and its Verilog text (already renamed).
struct Exported {
    info: BlockInfo,
    verilog: String,
}

/// Builds, checks and generates one parameter set. `cosim` is the file list the manifest will
/// show (`None` for a set without recorder).
fn generate(
    block: &BlockDef,
    set: &ParamSet,
    cosim: Option<CosimFiles>,
) -> Result<Exported, RtlError> {
    let name = set.module;
    let mut uut = (set.build)();
    uut.connect();
    uut.check().map_err(|detail| RtlError::Check {
        block: name.to_string(),
        detail,
    })?;
    let verilog = rename_top(&uut.verilog(), name);
    let header = format!(
        "// {name}: generated by waferstream-rtl from {} with rust-hdl 0.46.0.\n\
         // Do not edit; regenerate with `waferstream export-verilog --out DIR`.\n",
        set.rust_type
    );
    Ok(Exported {
        info: BlockInfo {
            name: name.to_string(),
            file: format!("{name}.v"),
            block: block.name.to_string(),
            top: block.top,
            rust_type: set.rust_type.to_string(),
            params: set
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            domain: block.domain,
            ecp5_clock_mhz: set.ecp5_clock_mhz,
            ports: uut.ports(),
            cosim,
        },
        verilog: header + &verilog,
    })
}

/// Co-simulation length and seed of one block under `filter`.
fn cosim_plan(block: &BlockDef, filter: &ExportFilter) -> (usize, u64) {
    (
        filter.cycles.unwrap_or(block.cosim_cycles),
        filter.seed.unwrap_or(DEFAULT_SEED),
    )
}

/// The exported modules (names, files, parameters, ports, co-sim file names) without writing
/// or recording anything.
pub fn blocks() -> Vec<BlockInfo> {
    let filter = ExportFilter::default();
    select(&filter)
        .expect("the unfiltered selection cannot fail")
        .into_iter()
        .map(|(b, s)| {
            let (cycles, seed) = cosim_plan(b, &filter);
            let cosim = s.recorder.map(|_| CosimFiles::of(s.module, cycles, seed));
            generate(b, s, cosim)
                .expect("registered RTL configurations must pass rust-hdl checks")
                .info
        })
        .collect()
}

/// Verilog text of one registered module by export name (e.g. `"rr_arbiter_5"`).
pub fn verilog_of(name: &str) -> Result<String, RtlError> {
    let (b, s) = named_blocks()
        .flat_map(|b| b.sets.iter().map(move |s| (b, s)))
        .find(|(_, s)| s.module == name)
        .ok_or_else(|| RtlError::UnknownBlock {
            name: name.to_string(),
            known: list(named_blocks().flat_map(|b| b.sets.iter().map(|s| s.module))),
        })?;
    Ok(generate(b, s, None)?.verilog)
}

/// Records the trace of one parameter set and checks it describes the exported module.
pub fn record_set(
    set: &ParamSet,
    ports: &[PortInfo],
    cycles: usize,
    seed: u64,
) -> Result<Option<PortTrace>, RtlError> {
    let Some(recorder) = set.recorder else {
        return Ok(None);
    };
    let trace = recorder(cycles, seed)?;
    let traced: Vec<&str> = trace
        .inputs
        .iter()
        .chain(&trace.outputs)
        .map(|p| p.name.as_str())
        .collect();
    let exported: Vec<&str> = ports
        .iter()
        .filter(|p| p.name != "clock")
        .map(|p| p.name.as_str())
        .collect();
    if trace.module != set.module || traced != exported {
        return Err(RtlError::Trace {
            module: set.module.to_string(),
            detail: format!(
                "recorder traced module {} with ports [{}], export has [{}]",
                trace.module,
                traced.join(", "),
                exported.join(", ")
            ),
        });
    }
    Ok(Some(trace))
}

/// Writes each module `filter` selects as `<module>.v` (plus its co-simulation files when the
/// block has a recorder), `manifest.json` and the verilator waiver file into `out_dir`
/// (created if missing). The filter is checked and the directory probed for writability
/// before anything is recorded or written. Returns the manifest that was written.
/// The cocotb runner written beside the Verilog: every module's `test_<module>.py` under
/// Icarus (cocotb's Python runner), one PASS/FAIL line per module, exit 1 on a failure.
pub const COCOTB_RUNNER: &str = "run_cocotb.py";
const COCOTB_RUNNER_PY: &str = include_str!("run_cocotb.py");

pub fn export_all(out_dir: &Path, filter: &ExportFilter) -> Result<Manifest, RtlError> {
    let selected = select(filter)?;
    let io = |path: PathBuf| move |source| RtlError::Io { path, source };
    fs::create_dir_all(out_dir).map_err(io(out_dir.to_path_buf()))?;
    let probe = out_dir.join(".waferstream-write-test");
    fs::write(&probe, b"").map_err(io(probe.clone()))?;
    fs::remove_file(&probe).map_err(io(probe.clone()))?;
    let mut modules = vec![];
    for (block, set) in selected {
        let (cycles, seed) = cosim_plan(block, filter);
        let mut e = generate(block, set, None)?;
        let path = out_dir.join(&e.info.file);
        fs::write(&path, &e.verilog).map_err(io(path.clone()))?;
        if let Some(trace) = record_set(set, &e.info.ports, cycles, seed)? {
            e.info.cosim = Some(trace.write_cosim(out_dir, seed)?);
        }
        modules.push(e.info);
    }
    let waivers = out_dir.join(WAIVER_FILE);
    fs::write(&waivers, VERILATOR_WAIVERS).map_err(io(waivers.clone()))?;
    let runner = out_dir.join(COCOTB_RUNNER);
    fs::write(&runner, COCOTB_RUNNER_PY).map_err(io(runner.clone()))?;
    let manifest = Manifest {
        generator: format!(
            "waferstream-rtl {} (rust-hdl 0.46.0)",
            env!("CARGO_PKG_VERSION")
        ),
        verilator_waivers: WAIVER_FILE.to_string(),
        modules,
    };
    let path = out_dir.join("manifest.json");
    let json = serde_json::to_string_pretty(&manifest)?;
    fs::write(&path, json + "\n").map_err(io(path.clone()))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(block: &str, params: &[(&str, &str)]) -> ExportFilter {
        ExportFilter {
            block: Some(block.into()),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn registry_is_consistent() {
        let mut modules = std::collections::HashSet::new();
        for b in named_blocks() {
            assert!(!b.sets.is_empty(), "{}: no parameter set", b.name);
            if b.top {
                assert!(
                    b.cosim_cycles >= TOP_COSIM_CYCLES,
                    "{}: top co-sim too short",
                    b.name
                );
            }
            let keys: Vec<&str> = b.sets[0].params.iter().map(|p| p.0).collect();
            for s in b.sets {
                // A round prototype clock, at most the 100 MHz the leaves close at.
                assert!(
                    (5..=100).contains(&s.ecp5_clock_mhz) && s.ecp5_clock_mhz % 5 == 0,
                    "{}: ecp5_clock_mhz {} is not a multiple of 5 MHz in 5..=100",
                    s.module,
                    s.ecp5_clock_mhz
                );
                assert!(
                    modules.insert(s.module),
                    "module {} registered twice",
                    s.module
                );
                let k: Vec<&str> = s.params.iter().map(|p| p.0).collect();
                assert_eq!(k, keys, "{}: parameter keys differ between sets", s.module);
            }
        }
    }

    #[test]
    fn select_by_block_and_param() {
        let sel = select(&filter("rr_arbiter", &[("n", "10")])).unwrap();
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].1.module, "rr_arbiter_10");
        assert_eq!(select(&filter("rr_arbiter", &[])).unwrap().len(), 2);
        assert_eq!(
            select(&filter("rr_arbiter_5", &[])).unwrap()[0].1.module,
            "rr_arbiter_5"
        );
    }

    #[test]
    fn select_refuses_unknowns_naming_them() {
        let e = select(&filter("router_top", &[])).unwrap_err().to_string();
        assert!(
            e.contains("router_top") && e.contains("rr_arbiter") && e.contains("credit_counter"),
            "{e}"
        );
        let e = select(&filter("rr_arbiter", &[("width", "5")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("width") && e.contains("allowed: n"), "{e}");
        let e = select(&filter("rr_arbiter", &[("n", "7")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("n = \"7\"") && e.contains("5, 10"), "{e}");
        let e = select(&filter("rr_arbiter", &[("n", "five")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("five") && e.contains("5, 10"), "{e}");
        let e = select(&ExportFilter {
            params: vec![("n".into(), "5".into())],
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--block"), "{e}");
        assert!(matches!(
            ExportFilter::parse_param("n"),
            Err(RtlError::ParamSyntax(_))
        ));
        assert_eq!(
            ExportFilter::parse_param("n=5").unwrap(),
            ("n".into(), "5".into())
        );
    }
}
