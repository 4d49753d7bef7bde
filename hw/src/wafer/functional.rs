//! Functional mode of the wafer (CL side): real values ride with the transfers, and the
//! result is checked against the FL (`sched::wafer::functional`, `collective::execute_fl`,
//! the FL dispatch plan).
//!
//! A transfer's payload is captured when the sender's sequencer hands it to the collective
//! engine (its dependences met: exactly the data its flits carry) and applied by the receiver
//! when the transfer's last flit lands — the flits themselves stay payload-free, so timing is
//! identical with and without functional mode. The payload store is shared like the link
//! arenas: slot x is written once, by x's sender, and read once, by x's receiver, in a later
//! cycle (after at least one barrier).

use std::collections::HashMap;
use std::sync::Mutex;

use sched::wafer::collective::{apply, execute_fl, ChunkId};
use sched::wafer::dispatch::A2aXfer;
use sched::wafer::functional::{die_inputs, expert_out, initial_data, token_chunk};

use super::program::LayerProgram;
use super::wafer::Wafer;

/// What a transfer carries in functional mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// An all-reduce chunk.
    Chunk(Vec<i64>),
    /// Dispatch: the tokens (assignment, value); combine: the experts' outputs.
    Tokens(Vec<(A2aXfer, Vec<i64>)>),
}

/// One slot per transfer of the layer.
pub struct PayloadStore {
    slots: Vec<Mutex<Option<Payload>>>,
}

impl PayloadStore {
    pub fn new(transfers: usize) -> Self {
        PayloadStore { slots: (0..transfers).map(|_| Mutex::new(None)).collect() }
    }
    pub fn put(&self, x: u32, p: Payload) {
        *self.slots[x as usize].lock().expect("payload slot") = Some(p);
    }
    pub fn take(&self, x: u32) -> Option<Payload> {
        self.slots[x as usize].lock().expect("payload slot").take()
    }
}

/// A die's functional state.
#[derive(Debug, Clone, Default)]
pub struct FuncDie {
    /// (micro-batch, chunk) → values: the die's copy of its activations' chunks.
    pub data: HashMap<(u32, ChunkId), Vec<i64>>,
    /// Tokens received for this die's experts: (mb, assignment) → value.
    pub dispatched: HashMap<(u32, (u32, u32, u32)), Vec<i64>>,
    /// Expert outputs received back: (mb, assignment) → value.
    pub combined: HashMap<(u32, (u32, u32, u32)), Vec<i64>>,
    /// Something the die could not do (a chunk it did not hold when it had to send it).
    pub errors: Vec<String>,
}

fn key(a: &A2aXfer) -> (u32, u32, u32) {
    (a.group, a.token, a.expert)
}

impl FuncDie {
    /// Die `die`'s inputs: its group's chunks of every micro-batch.
    pub fn new(die: u32, prog: &LayerProgram) -> Self {
        let mut f = FuncDie::default();
        let (Some(m), Some(plan)) = (&prog.mapping, &prog.allreduce) else { return f };
        for mb in 0..prog.micro_batches {
            f.data.extend(die_inputs(m, plan, die, mb).into_iter().map(|(id, v)| ((mb, id), v)));
        }
        f
    }

    /// The payload of transfer `x` as this die sends it now.
    pub fn payload(&mut self, die: u32, x: u32, prog: &LayerProgram) -> Payload {
        let n = &prog.xfers[x as usize];
        let m = prog.mapping.as_ref().expect("functional mode keeps the mapping");
        match n.phase {
            super::program::Phase::AllReduce => {
                let c = n.chunk.expect("all-reduce transfers name their chunk");
                match self.data.get(&(n.mb, c)) {
                    Some(v) => Payload::Chunk(v.clone()),
                    None => {
                        self.errors.push(format!("die {die}: sends chunk {c:?} of micro-batch {} it does not hold (transfer {x})", n.mb));
                        Payload::Chunk(Vec::new())
                    }
                }
            }
            super::program::Phase::Dispatch => Payload::Tokens(
                prog.items[&x]
                    .iter()
                    .map(|a| {
                        let v = self.data.get(&(n.mb, token_chunk(m, a.group, a.token))).cloned().unwrap_or_else(|| {
                            self.errors.push(format!("die {die}: dispatches token {} of group {} without its chunk", a.token, a.group));
                            Vec::new()
                        });
                        (*a, v)
                    })
                    .collect(),
            ),
            super::program::Phase::Combine => Payload::Tokens(
                prog.items[&x]
                    .iter()
                    .map(|a| {
                        let v = self.dispatched.get(&(n.mb, key(a))).map(|v| expert_out(v, a.expert)).unwrap_or_else(|| {
                            self.errors.push(format!("die {die}: combines token {} of group {} (expert {}) it never received", a.token, a.group, a.expert));
                            Vec::new()
                        });
                        (*a, v)
                    })
                    .collect(),
            ),
        }
    }

    /// Applies transfer `x`'s payload on arrival.
    pub fn arrive(&mut self, x: u32, p: Option<Payload>, prog: &LayerProgram) {
        let n = &prog.xfers[x as usize];
        match (n.phase, p) {
            (super::program::Phase::AllReduce, Some(Payload::Chunk(v))) => apply(self.data.entry((n.mb, n.chunk.expect("chunk"))).or_default(), v, n.reduce),
            (super::program::Phase::Dispatch, Some(Payload::Tokens(t))) => {
                for (a, v) in t {
                    self.dispatched.insert((n.mb, key(&a)), v);
                }
            }
            (super::program::Phase::Combine, Some(Payload::Tokens(t))) => {
                for (a, v) in t {
                    self.combined.insert((n.mb, key(&a)), v);
                }
            }
            (ph, p) => self.errors.push(format!("transfer {x} ({ph:?}) arrived with payload {p:?}")),
        }
    }
}

/// What the functional check compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FuncReport {
    pub chunks_checked: u64,
    pub tokens_checked: u64,
    pub outputs_checked: u64,
}

/// Compares every die's reduced chunks, received tokens and returned expert outputs with the
/// FL reference. The first difference is the error.
pub fn check(prog: &LayerProgram, w: &Wafer) -> Result<FuncReport, String> {
    let m = prog.mapping.as_ref().ok_or("no mapping in the program")?;
    let plan = prog.allreduce.as_ref().ok_or("no all-reduce plan in the program")?;
    let mut rep = FuncReport::default();
    let dies: Vec<&FuncDie> = w.tiles().map(|t| t.die.func.as_ref().ok_or("the wafer ran in timing mode")).collect::<Result<_, _>>()?;
    for (d, f) in dies.iter().enumerate() {
        if let Some(e) = f.errors.first() {
            return Err(format!("die {d}: {e}"));
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
                return Err(format!("micro-batch {mb}: die {} chunk {:?}: CL {:?}, FL {:?}", k.0, k.1, got, expect[k]));
            }
            rep.chunks_checked += 1;
        }
        // Dispatch and combine: every assignment that crossed the network.
        for a in prog.assignments[mb as usize].iter().filter(|a| a.src != a.dst) {
            let want = &expect[&(a.src, token_chunk(m, a.group, a.token))];
            let got = dies[a.dst as usize].dispatched.get(&(mb, key(a)));
            if got != Some(want) {
                return Err(format!("micro-batch {mb}: token {} of group {} at die {} (expert {}): CL {:?}, FL {:?}", a.token, a.group, a.dst, a.expert, got, want));
            }
            rep.tokens_checked += 1;
            let out = expert_out(want, a.expert);
            let back = dies[a.src as usize].combined.get(&(mb, key(a)));
            if back != Some(&out) {
                return Err(format!("micro-batch {mb}: output of expert {} for token {} of group {} back at die {}: CL {:?}, FL {:?}", a.expert, a.token, a.group, a.src, back, out));
            }
            rep.outputs_checked += 1;
        }
    }
    Ok(rep)
}
