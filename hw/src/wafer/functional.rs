//! Functional mode of the wafer (CL side): the dies compute on real values (`payload.rs`:
//! each die's functional state and the payloads its transfers carry), and after the run the
//! result is checked here against the FL (`sched::wafer::functional`, `collective::execute_fl`,
//! the FL dispatch plan).

use sched::wafer::collective::{execute_fl, ChunkId};
use sched::wafer::functional::{expert_out, initial_data, token_chunk};

use super::payload::key;
pub use super::payload::{FuncDie, Payload, PayloadStore};
use super::program::LayerProgram;
use super::wafer::Wafer;
use crate::Error;

/// What the functional check compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FuncReport {
    pub chunks_checked: u64,
    pub tokens_checked: u64,
    pub outputs_checked: u64,
}

/// Compares every die's reduced chunks, received tokens and returned expert outputs with the
/// FL reference. The first difference is the error ([`Error::Mismatch`] at the die or the
/// micro-batch; [`Error::Msg`] for a program or run that cannot be checked).
pub fn check(prog: &LayerProgram, w: &Wafer) -> Result<FuncReport, Error> {
    let m = prog.mapping.as_ref().ok_or("no mapping in the program")?;
    let plan = prog.allreduce.as_ref().ok_or("no all-reduce plan in the program")?;
    let mut rep = FuncReport::default();
    let dies: Vec<&FuncDie> = w.tiles().map(|t| t.die.func.as_ref().ok_or("the wafer ran in timing mode")).collect::<Result<_, &str>>()?;
    for (d, f) in dies.iter().enumerate() {
        if let Some(e) = f.errors.first() {
            return Err(Error::Mismatch { at: format!("die {d}"), msg: e.to_string() });
        }
    }
    for mb in 0..prog.micro_batches {
        let expect = execute_fl(plan, &initial_data(m, plan, mb));
        // All-reduce: every chunk the FL leaves on a die, the CL left there too.
        let mut keys: Vec<&(u32, ChunkId)> = expect.keys().collect();
        keys.sort();
        for k in keys {
            let got = dies[k.0 as usize].data.get(&(mb, k.1));
            if got != Some(&expect[k]) {
                return Err(Error::Mismatch { at: format!("micro-batch {mb}"), msg: format!("die {} chunk {:?}: CL {:?}, FL {:?}", k.0, k.1, got, expect[k]) });
            }
            rep.chunks_checked += 1;
        }
        // Dispatch and combine: every assignment that crossed the network.
        for a in prog.assignments[mb as usize].iter().filter(|a| a.src != a.dst) {
            let want = &expect[&(a.src, token_chunk(m, a.group, a.token))];
            let got = dies[a.dst as usize].dispatched.get(&(mb, key(a)));
            if got != Some(want) {
                return Err(Error::Mismatch { at: format!("micro-batch {mb}"), msg: format!("token {} of group {} at die {} (expert {}): CL {:?}, FL {:?}", a.token, a.group, a.dst, a.expert, got, want) });
            }
            rep.tokens_checked += 1;
            let out = expert_out(want, a.expert);
            let back = dies[a.src as usize].combined.get(&(mb, key(a)));
            if back != Some(&out) {
                return Err(Error::Mismatch { at: format!("micro-batch {mb}"), msg: format!("output of expert {} for token {} of group {} back at die {}: CL {:?}, FL {:?}", a.expert, a.token, a.group, a.src, back, out) });
            }
            rep.outputs_checked += 1;
        }
    }
    Ok(rep)
}
