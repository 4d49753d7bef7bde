//! A die's functional state and what its transfers carry in functional mode (the wafer's
//! `functional.rs` checks the result): real values ride with the transfers, the flits stay
//! payload-free.
//!
//! A transfer's payload is captured when the sender's sequencer hands it to the collective
//! engine (its dependences met: exactly the data its flits carry) and applied by the receiver
//! when the transfer's last flit lands — so timing is identical with and without functional
//! mode. The payload store is shared like the link arenas: slot x is written once, by x's
//! sender, and read once, by x's receiver, in a later cycle (after at least one barrier).

use std::collections::HashMap;
use std::sync::Mutex;

use sched::wafer::collective::{apply, ChunkId};
use sched::wafer::dispatch::A2aXfer;
use sched::wafer::functional::{die_inputs, expert_out, token_chunk};

use super::program::{LayerProgram, Phase};

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

pub(crate) fn key(a: &A2aXfer) -> (u32, u32, u32) {
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
            Phase::AllReduce => {
                let c = n.chunk.expect("all-reduce transfers name their chunk");
                match self.data.get(&(n.mb, c)) {
                    Some(v) => Payload::Chunk(v.clone()),
                    None => {
                        self.errors.push(format!("die {die}: sends chunk {c:?} of micro-batch {} it does not hold (transfer {x})", n.mb));
                        Payload::Chunk(Vec::new())
                    }
                }
            }
            Phase::Dispatch => Payload::Tokens(
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
            Phase::Combine => Payload::Tokens(
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
            (Phase::AllReduce, Some(Payload::Chunk(v))) => apply(self.data.entry((n.mb, n.chunk.expect("chunk"))).or_default(), v, n.reduce),
            (Phase::Dispatch, Some(Payload::Tokens(t))) => {
                for (a, v) in t {
                    self.dispatched.insert((n.mb, key(&a)), v);
                }
            }
            (Phase::Combine, Some(Payload::Tokens(t))) => {
                for (a, v) in t {
                    self.combined.insert((n.mb, key(&a)), v);
                }
            }
            (ph, p) => self.errors.push(format!("transfer {x} ({ph:?}) arrived with payload {p:?}")),
        }
    }
}
