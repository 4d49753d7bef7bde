//! Verilog export of the standard block configurations (S3: per block, never the wafer top).
//!
//! `export_all(dir)` writes one self-contained Verilog file per block plus `manifest.json`
//! (module name, file, parameters, ports) and `verilator_waivers.vlt` (the lint waivers for
//! rust-hdl's code generator, each with its reason). The CLI's `export-verilog --out DIR`
//! calls it.
//!
//! rust-hdl names the top module `top` and each sub-block `top$<field>`; we rename that root
//! to the block's export name (`rr_arbiter_5`, `rr_arbiter_5$ptr_oh`) so several exported
//! files can be read into one FPGA project without module-name clashes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rust_hdl::prelude::*;
use serde::{Deserialize, Serialize};

use crate::credit_counter::CreditCounterRtl;
use crate::rr_arbiter::RrArbiterRtl;
use crate::RtlError;

/// Direction of a top-level port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortDir {
    Input,
    Output,
    Inout,
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
    /// The Rust type it was generated from.
    pub rust_type: String,
    /// Configuration values baked into the Verilog (widths, depth).
    pub parameters: BTreeMap<String, u64>,
    /// Top-level ports in declaration order (S3: clock, reset, inputs, outputs).
    pub ports: Vec<PortInfo>,
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
";

/// A block prepared for export: its info and its Verilog text (already renamed).
struct Exported {
    info: BlockInfo,
    verilog: String,
}

fn ports_of<U: Block>(uut: &U) -> Vec<PortInfo> {
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
            let direction = match signal.kind() {
                AtomKind::InputParameter => PortDir::Input,
                AtomKind::OutputParameter | AtomKind::OutputPassthrough => PortDir::Output,
                AtomKind::InOutParameter => PortDir::Inout,
                _ => return,
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

fn export_block<U: Block>(
    mut uut: U,
    name: &str,
    rust_type: &str,
    parameters: &[(&str, u64)],
) -> Result<Exported, RtlError> {
    uut.connect_all();
    check_all(&uut).map_err(|e| RtlError::Check {
        block: name.to_string(),
        detail: format!("{e:?}"),
    })?;
    let verilog = rename_top(&generate_verilog(&uut), name);
    let header = format!(
        "// {name}: generated by waferstream-rtl from {rust_type} with rust-hdl 0.46.0.\n\
         // Do not edit; regenerate with `waferstream export-verilog --out DIR`.\n"
    );
    Ok(Exported {
        info: BlockInfo {
            name: name.to_string(),
            file: format!("{name}.v"),
            rust_type: rust_type.to_string(),
            parameters: parameters
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            ports: ports_of(&uut),
        },
        verilog: header + &verilog,
    })
}

/// Standard configurations exported to Verilog.
fn build_all() -> Result<Vec<Exported>, RtlError> {
    Ok(vec![
        export_block(
            RrArbiterRtl::<5>::new(5),
            "rr_arbiter_5",
            "RrArbiterRtl<5>",
            &[("n", 5)],
        )?,
        export_block(
            RrArbiterRtl::<10>::new(10),
            "rr_arbiter_10",
            "RrArbiterRtl<10>",
            &[("n", 10)],
        )?,
        export_block(
            CreditCounterRtl::<4>::new(8),
            "credit_counter_8",
            "CreditCounterRtl<4>",
            &[("width", 4), ("depth", 8)],
        )?,
    ])
}

/// The exported blocks (names, files, parameters, ports) without writing anything.
pub fn blocks() -> Vec<BlockInfo> {
    build_all()
        .expect("standard RTL configurations must pass rust-hdl checks")
        .into_iter()
        .map(|e| e.info)
        .collect()
}

/// Verilog text of one standard block by export name (e.g. `"rr_arbiter_5"`).
pub fn verilog_of(name: &str) -> Result<String, RtlError> {
    build_all()?
        .into_iter()
        .find(|e| e.info.name == name)
        .map(|e| e.verilog)
        .ok_or_else(|| RtlError::UnknownBlock(name.to_string()))
}

/// Writes every standard block as `<name>.v`, plus `manifest.json` and the verilator waiver
/// file, into `out_dir` (created if missing). Returns the manifest that was written.
pub fn export_all(out_dir: &Path) -> Result<Manifest, RtlError> {
    let io = |path: PathBuf| move |source| RtlError::Io { path, source };
    fs::create_dir_all(out_dir).map_err(io(out_dir.to_path_buf()))?;
    let mut modules = vec![];
    for e in build_all()? {
        let path = out_dir.join(&e.info.file);
        fs::write(&path, &e.verilog).map_err(io(path.clone()))?;
        modules.push(e.info);
    }
    let waivers = out_dir.join(WAIVER_FILE);
    fs::write(&waivers, VERILATOR_WAIVERS).map_err(io(waivers.clone()))?;
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
