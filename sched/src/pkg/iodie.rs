//! FL twin of the IO-die scheduler of the FSE-DP package (seeds/expert-streaming.txt §V,
//! Fig. 8; SPEC §3): the Expert Information Table (EIT), the bitonic sorter, the expert order
//! (paired-load policy), the Idle Chiplet Vector (ICV), the Expert–Chiplet (E–C) matcher of
//! Algorithm 1, token buffering with per-request QoS timers (Algorithm 2), and the trajectory
//! ring geometry every chiplet uses to forward micro-slices.
//!
//! The CL scheduler (`hw::pkg::iodie::IoDieSchedulerCl`) reaches exactly the decisions of this
//! file — the same message sequence — and only adds the cycles its micro-architecture takes.
//!
//! # Reading of the paper fixed here
//!
//! * **EIT.** Entry e = { trajectory mask T_e (bit c set iff chiplet c holds ≥ 1 token routed
//!   to e), count n_e = total tokens routed to e }. Experts with n_e = 0 are not scheduled.
//!   N ≤ 16 chiplets ([`MAX_CHIPLETS`]), ≤ 256 experts ([`MAX_EXPERTS`]).
//! * **Bitonic sorter.** Sorts (n_e, e) by n_e descending, ties by the lower expert id first,
//!   as a real bitonic network of width P = next power of two ≥ E (padding entries are
//!   (0, id ≥ E) and so sort after every real expert). It has log2 P·(log2 P + 1)/2 stages of
//!   independent compare-exchanges ([`bitonic_stages`]); the CL spends one cycle per stage.
//! * **Order policy** ([`OrderPolicy`]): `Paired` = hottest, coldest, 2nd hottest, 2nd
//!   coldest, … over the sorted non-zero experts (paper §IV-A, Fig. 5); `HotFirst` = sorted
//!   descending; `ById` = expert id order, no sort (the A1/A2 ablations).
//! * **Messages.** At layer start, after ordering, every scheduled expert is announced as a
//!   `Preload` in order (the DDR load sequence, Rule 4 "pre-load e to any idle buffer"); then
//!   `Grant`s follow Algorithm 1. Every expert gets exactly one `Preload`, then exactly one
//!   `Grant`.
//! * **ICV / Algorithm 1.** ICV bit c = chiplet c idle; all idle at layer start. Whenever
//!   ICV ≠ 0 the matcher scans the order from its head for the first not-yet-granted e with
//!   T_e ∩ ICV ≠ ∅ and grants it: c* = the first idle member of T_e in snake order,
//!   `Grant { expert, mask: T_e, start: c* }`, ICV ← ICV ∧ ¬T_e (AND-NOT with the trajectory:
//!   the busy members join the expert's trajectory too, their work simply queues behind what
//!   they already run — virtualization Rules 1–2), then scans again from the head. It stops
//!   when nothing is grantable or everything is granted. A release (`done_mask`, OR of the
//!   chiplets that pulsed "done": finished every micro-slice of every granted expert they are
//!   a member of) sets ICV ← ICV ∨ done_mask and runs the same scan. Releases are processed
//!   one at a time in arrival order (the CL queues them in a FIFO), so both levels see the
//!   same sequence of ICV values.
//! * **Stale done pulses.** A busy chiplet may be put into a new trajectory (a grant's
//!   non-start member) while its done pulse is on its way to the IO die: that pulse covers
//!   only the grants the chiplet had received, and setting its ICV bit would let the matcher
//!   pick a chiplet that is about to work. [`TrajectorySchedulerFl::release_seen`] therefore
//!   drops the bit of every chiplet named by a grant the pulsing chiplets had not yet
//!   received (the CL decides the same from its grant times and the link latencies). The
//!   chiplet will pulse again when the new work is done.
//! * **Trajectory ring.** T_e's members in the package's snake order (row 0 left→right,
//!   row 1 right→left, …; chiplet id = row·C + col), cyclic. Micro-slice k of an expert is
//!   loaded from DDR by ring member (s + k) mod |T_e|, s = the ring position of the grant's
//!   start chiplet c* (docs/architecture.md, "Trajectory"), and then visits every member
//!   once in ring order: [`next_station_fl`] returns `None` after |T_e| stations (Rule 3:
//!   the last station frees the slot).
//! * **Token buffering (Algorithm 2)** — see [`TokenBufferFl`].

use serde::{Deserialize, Serialize};

use crate::ids::{ChipletId, ExpertId, ReqId};

/// Largest package: 16 chiplets (4×4), so a trajectory mask / the ICV fits in a `u16`.
pub const MAX_CHIPLETS: usize = 16;
/// Largest EIT: 256 experts (so an expert id fits in a `u8`-wide index plus one bit).
pub const MAX_EXPERTS: usize = 256;

/// Input that cannot be scheduled (never a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IoDieError {
    #[error("array {rows}x{cols}: the IO die schedules 1..={MAX_CHIPLETS} chiplets")]
    Array { rows: usize, cols: usize },
    #[error("{0} experts: the EIT holds at most {MAX_EXPERTS}")]
    TooManyExperts(usize),
    #[error("expert {expert}: {n} per-chiplet counts for a package of {chiplets} chiplets")]
    ChipletCount { expert: ExpertId, n: usize, chiplets: usize },
    #[error("expert {expert}: EIT mask {mask:#x} has bits outside the {chiplets} chiplets or disagrees with count {count}")]
    BadEntry { expert: ExpertId, mask: u16, count: u32, chiplets: usize },
    #[error("request {req}: expert {expert} / chiplet {chiplet} out of range ({experts} experts, {chiplets} chiplets)")]
    BadRouting { req: ReqId, expert: ExpertId, chiplet: ChipletId, experts: usize, chiplets: usize },
    #[error("request slot {slot}: the QoS timer bank has {slots} slots")]
    BadSlot { slot: ReqId, slots: usize },
    #[error("token count of expert {expert} overflows u32")]
    Overflow { expert: ExpertId },
    #[error("no chiplets to place experts on")]
    NoChiplets,
    #[error("token-buffer config field `{field}`: {reason}")]
    Cfg { field: &'static str, reason: String },
}

/// One EIT entry: trajectory mask and token count of an expert (its index is the expert id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub struct EitEntryFl {
    /// T_e: bit c set iff chiplet c holds at least one token routed to the expert.
    pub mask: u16,
    /// n_e: tokens routed to the expert over all chiplets.
    pub count: u32,
}

/// The EIT of one MoE layer from the gating output: `counts[e][c]` = tokens on chiplet c
/// routed to expert e (tokens live on their home chiplet).
pub fn eit_fl(counts: &[Vec<u32>], chiplets: usize) -> Result<Vec<EitEntryFl>, IoDieError> {
    if chiplets == 0 || chiplets > MAX_CHIPLETS {
        return Err(IoDieError::Array { rows: 1, cols: chiplets });
    }
    if counts.len() > MAX_EXPERTS {
        return Err(IoDieError::TooManyExperts(counts.len()));
    }
    counts
        .iter()
        .enumerate()
        .map(|(e, row)| {
            // e < MAX_EXPERTS (checked above), so it fits an expert id.
            let e = ExpertId(e as u16);
            if row.len() != chiplets {
                return Err(IoDieError::ChipletCount { expert: e, n: row.len(), chiplets });
            }
            let mut mask = 0u16;
            let mut count = 0u32;
            for (c, &n) in row.iter().enumerate() {
                if n > 0 {
                    mask |= 1 << c;
                }
                count = count.checked_add(n).ok_or(IoDieError::Overflow { expert: e })?;
            }
            Ok(EitEntryFl { mask, count })
        })
        .collect()
}

/// Checks an EIT given directly (not built by [`eit_fl`]): at most [`MAX_EXPERTS`] entries,
/// masks inside the package, and mask ≠ 0 exactly when count > 0.
pub fn check_eit(eit: &[EitEntryFl], chiplets: usize) -> Result<(), IoDieError> {
    if eit.len() > MAX_EXPERTS {
        return Err(IoDieError::TooManyExperts(eit.len()));
    }
    let all = all_mask(chiplets);
    for (e, x) in eit.iter().enumerate() {
        if x.mask & !all != 0 || (x.mask == 0) != (x.count == 0) {
            return Err(IoDieError::BadEntry { expert: ExpertId(e as u16), mask: x.mask, count: x.count, chiplets });
        }
    }
    Ok(())
}

/// ICV value with every one of `chiplets` chiplets idle.
pub fn all_mask(chiplets: usize) -> u16 {
    if chiplets >= 16 {
        u16::MAX
    } else {
        (1u16 << chiplets) - 1
    }
}

// ---------------------------------------------------------------- bitonic sorter

/// A sorter key: (token count, expert id).
pub type SortKey = (u32, ExpertId);

/// Sorter order: `a` goes before `b` — larger count first, ties by the lower expert id.
#[inline]
pub fn key_before(a: SortKey, b: SortKey) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// Width of the sorter network for `n` inputs: the next power of two (≥ 1).
pub fn sorter_width(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// The stages of the bitonic network of width `p` (a power of two), in order: each stage is
/// (k, j) of the classic construction; all of a stage's compare-exchanges are independent
/// (one hardware cycle). `p·log2 p·(log2 p + 1)/4` comparators in all.
pub fn bitonic_stages(p: usize) -> Vec<(usize, usize)> {
    assert!(p.is_power_of_two(), "bitonic width {p} is not a power of two");
    let mut st = Vec::new();
    let mut k = 2;
    while k <= p {
        let mut j = k / 2;
        while j > 0 {
            st.push((k, j));
            j /= 2;
        }
        k *= 2;
    }
    st
}

/// Number of stages of a width-`p` bitonic network: log2 p·(log2 p + 1)/2.
pub fn bitonic_stage_count(p: usize) -> usize {
    let l = p.max(1).trailing_zeros() as usize;
    l * (l + 1) / 2
}

/// Applies stage (k, j) of the bitonic network to `v` (length a power of two ≥ k):
/// compare-exchange of i and i ^ j for every i < i ^ j, towards "before" order where
/// `i & k == 0` and the reverse elsewhere. This is the one function both levels use for a
/// sorter stage (the CL applies it to its stage register once per cycle).
pub fn bitonic_stage_apply(v: &mut [SortKey], k: usize, j: usize) {
    for i in 0..v.len() {
        let l = i ^ j;
        if l > i {
            let up = i & k == 0;
            let swap = if up { key_before(v[l], v[i]) } else { key_before(v[i], v[l]) };
            if swap {
                v.swap(i, l);
            }
        }
    }
}

/// Pads `keys` to the sorter width with (0, id) entries, ids continuing after the largest
/// real id, so they sort after every real key.
pub fn sorter_pad(keys: &[SortKey]) -> Vec<SortKey> {
    let p = sorter_width(keys.len());
    let base = keys.iter().map(|k| k.1 .0 as u32 + 1).max().unwrap_or(0);
    let mut v = keys.to_vec();
    // Padding ids may exceed u16 for huge inputs only if ids are near u16::MAX; the EIT's ids
    // are < 256, so saturate (ties among padding never reach the output prefix).
    v.extend((0..p - keys.len()).map(|i| (0, ExpertId((base + i as u32).min(u16::MAX as u32) as u16))));
    v
}

/// Sorts (count, expert) keys by count descending, ties by lower expert id, by running the
/// bitonic network's compare-exchange sequence. Returns the sorted real keys (padding dropped).
pub fn bitonic_sort_fl(keys: &[SortKey]) -> Vec<SortKey> {
    let mut v = sorter_pad(keys);
    for (k, j) in bitonic_stages(v.len()) {
        bitonic_stage_apply(&mut v, k, j);
    }
    v.truncate(keys.len());
    v
}

// ---------------------------------------------------------------- order

/// Expert order policy of the scheduler (the ablations of paper §VI-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderPolicy {
    /// Paired-load policy: hottest, coldest, 2nd hottest, 2nd coldest, … (A3 and later).
    #[default]
    Paired,
    /// Sorted by token count, hottest first.
    HotFirst,
    /// Expert id order, no sort (A1/A2).
    ById,
}

/// Applies the paired-load interleave to a hot-first list: `s[0], s[K−1], s[1], s[K−2], …`
pub fn paired_fl(sorted: &[ExpertId]) -> Vec<ExpertId> {
    let mut out = Vec::with_capacity(sorted.len());
    let (mut i, mut j) = (0usize, sorted.len());
    while i < j {
        out.push(sorted[i]);
        i += 1;
        if i < j {
            j -= 1;
            out.push(sorted[j]);
        }
    }
    out
}

/// The scheduling order of the experts with n_e > 0 under `policy`.
pub fn order_fl(eit: &[EitEntryFl], policy: OrderPolicy) -> Vec<ExpertId> {
    match policy {
        OrderPolicy::ById => (0..eit.len()).filter(|&e| eit[e].count > 0).map(|e| ExpertId(e as u16)).collect(),
        OrderPolicy::HotFirst | OrderPolicy::Paired => {
            let keys: Vec<SortKey> = eit.iter().enumerate().map(|(e, x)| (x.count, ExpertId(e as u16))).collect();
            let hot: Vec<ExpertId> = bitonic_sort_fl(&keys).into_iter().take_while(|k| k.0 > 0).map(|k| k.1).collect();
            if policy == OrderPolicy::Paired {
                paired_fl(&hot)
            } else {
                hot
            }
        }
    }
}

// ---------------------------------------------------------------- trajectory geometry

/// Chiplet ids of an R×C package in snake order (row 0 left→right, row 1 right→left, …).
pub fn snake_order(rows: usize, cols: usize) -> Vec<ChipletId> {
    let mut v = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for i in 0..cols {
            let c = if r % 2 == 0 { i } else { cols - 1 - i };
            v.push(ChipletId((r * cols + c) as u8));
        }
    }
    v
}

/// Members of trajectory `mask` in snake order (the ring).
pub fn ring_fl(mask: u16, rows: usize, cols: usize) -> Vec<ChipletId> {
    snake_order(rows, cols).into_iter().filter(|&c| in_mask(mask, c)).collect()
}

/// Chiplet `c` is a member of `mask` (a trajectory mask or the ICV; ids ≥ 16 never are).
#[inline]
pub fn in_mask(mask: u16, c: ChipletId) -> bool {
    c.0 < 16 && mask >> c.0 & 1 == 1
}

/// Cyclic successor of `chiplet` on the ring of `mask` (the die router's next-hop entry for
/// the expert); `None` if `chiplet` is not a member or the only one.
pub fn next_hop_fl(mask: u16, chiplet: ChipletId, rows: usize, cols: usize) -> Option<ChipletId> {
    let ring = ring_fl(mask, rows, cols);
    let p = ring.iter().position(|&c| c == chiplet)?;
    (ring.len() > 1).then(|| ring[(p + 1) % ring.len()])
}

/// Chiplet that loads micro-slice `k` of an expert with trajectory `mask` granted with start
/// chiplet `start`: ring member (s + k) mod |T_e|, s = ring position of `start` (position 0
/// if `start` is not a member). `None` for an empty mask.
pub fn loader_fl(mask: u16, start: ChipletId, k: usize, rows: usize, cols: usize) -> Option<ChipletId> {
    let ring = ring_fl(mask, rows, cols);
    if ring.is_empty() {
        return None;
    }
    let s = ring.iter().position(|&c| c == start).unwrap_or(0);
    Some(ring[(s + k) % ring.len()])
}

/// Where a micro-slice loaded by `loader` goes after computing on `current`: the next ring
/// member, or `None` when `current` is its last station (the ring predecessor of the loader:
/// |T_e| stations visited) or not a member — Rule 3 then frees its slot.
pub fn next_station_fl(mask: u16, loader: ChipletId, current: ChipletId, rows: usize, cols: usize) -> Option<ChipletId> {
    let nxt = next_hop_fl(mask, current, rows, cols)?;
    (nxt != loader && mask >> loader.0 & 1 == 1).then_some(nxt)
}

/// Sharded loading (`loaders = "all"`): micro-slice `k` of every expert is loaded by the
/// chiplet at snake position `k mod N` of the whole package, member of the trajectory or
/// not — every expert's bytes come from all N DDR channels.
pub fn shard_loader_fl(k: usize, rows: usize, cols: usize) -> ChipletId {
    let s = snake_order(rows, cols);
    s[k % s.len()]
}

/// Where a micro-slice loaded by `loader` goes after `current` under sharded loading. A
/// member loader: as [`next_station_fl`]. A helper (a loader off the trajectory, which only
/// loads and forwards): from the helper to the first member after it in snake order, then
/// round the ring until every member has had it.
pub fn shard_next_station_fl(mask: u16, loader: ChipletId, current: ChipletId, rows: usize, cols: usize) -> Option<ChipletId> {
    if mask >> loader.0 & 1 == 1 {
        return next_station_fl(mask, loader, current, rows, cols);
    }
    let snake = snake_order(rows, cols);
    let p = snake.iter().position(|&c| c == loader)?;
    let first = (1..=snake.len()).map(|i| snake[(p + i) % snake.len()]).find(|&c| in_mask(mask, c))?;
    if current == loader {
        return Some(first);
    }
    let nxt = next_hop_fl(mask, current, rows, cols)?;
    (nxt != first).then_some(nxt)
}

/// The grant's start chiplet: the first member of `mask ∩ icv` in snake order.
pub fn start_chiplet_fl(mask: u16, icv: u16, snake: &[ChipletId]) -> Option<ChipletId> {
    snake.iter().copied().find(|&c| (mask & icv) >> c.0 & 1 == 1)
}

// ---------------------------------------------------------------- Algorithm 1

/// A decision of the scheduler, sent from the IO die to the chiplets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SchedMsg {
    /// Rule 4: the members of `mask` may start loading the expert's micro-slices from DDR
    /// into free ring slots (DDR loaders fetch in preload order).
    Preload { expert: ExpertId, mask: u16 },
    /// Algorithm 1 line 7: the expert streams along trajectory `mask`, its first micro-slice
    /// loaded by `start` (an idle chiplet); the members program their next-hop tables.
    Grant { expert: ExpertId, mask: u16, start: ChipletId },
}

impl Default for SchedMsg {
    fn default() -> Self {
        SchedMsg::Preload { expert: ExpertId(0), mask: 0 }
    }
}

impl SchedMsg {
    pub fn expert(&self) -> ExpertId {
        match *self {
            SchedMsg::Preload { expert, .. } | SchedMsg::Grant { expert, .. } => expert,
        }
    }
    pub fn mask(&self) -> u16 {
        match *self {
            SchedMsg::Preload { mask, .. } | SchedMsg::Grant { mask, .. } => mask,
        }
    }
    pub fn is_grant(&self) -> bool {
        matches!(self, SchedMsg::Grant { .. })
    }
    /// `Preload` from bare numbers (tests and the RTL seam, where ids are bit vectors).
    pub fn preload(expert: u16, mask: u16) -> Self {
        SchedMsg::Preload { expert: ExpertId(expert), mask }
    }
    /// `Grant` from bare numbers (tests and the RTL seam, where ids are bit vectors).
    pub fn grant(expert: u16, mask: u16, start: u8) -> Self {
        SchedMsg::Grant { expert: ExpertId(expert), mask, start: ChipletId(start) }
    }
}

/// Algorithm 1 (spatiotemporal trajectory scheduling) with the E–C matcher's ICV.
#[derive(Debug, Clone)]
pub struct TrajectorySchedulerFl {
    rows: usize,
    cols: usize,
    snake: Vec<ChipletId>,
    eit: Vec<EitEntryFl>,
    order: Vec<ExpertId>,
    granted: Vec<bool>,
    preloaded: Vec<bool>,
    remaining: usize,
    icv: u16,
    /// Masks of this layer's grants in issue order (for stale-pulse filtering).
    grant_log: Vec<u16>,
}

impl TrajectorySchedulerFl {
    /// A scheduler for an R×C package (1 ≤ R·C ≤ 16).
    pub fn new(rows: usize, cols: usize) -> Result<Self, IoDieError> {
        if rows == 0 || cols == 0 || rows * cols > MAX_CHIPLETS {
            return Err(IoDieError::Array { rows, cols });
        }
        Ok(TrajectorySchedulerFl {
            rows,
            cols,
            snake: snake_order(rows, cols),
            eit: Vec::new(),
            order: Vec::new(),
            granted: Vec::new(),
            preloaded: Vec::new(),
            remaining: 0,
            icv: all_mask(rows * cols),
            grant_log: Vec::new(),
        })
    }

    pub fn chiplets(&self) -> usize {
        self.rows * self.cols
    }

    /// Current Idle Chiplet Vector.
    pub fn icv(&self) -> u16 {
        self.icv
    }

    /// The layer's expert order.
    pub fn order(&self) -> &[ExpertId] {
        &self.order
    }

    /// Starts a layer: all chiplets idle, the order computed, every scheduled expert
    /// preloaded in order, then the grants possible with all chiplets idle.
    pub fn begin_layer(&mut self, eit: &[EitEntryFl], policy: OrderPolicy) -> Result<Vec<SchedMsg>, IoDieError> {
        check_eit(eit, self.chiplets())?;
        self.eit = eit.to_vec();
        self.order = order_fl(eit, policy);
        self.granted = vec![false; eit.len()];
        self.preloaded = vec![false; eit.len()];
        self.remaining = self.order.len();
        self.icv = all_mask(self.chiplets());
        self.grant_log.clear();
        let mut out = Vec::new();
        for &e in &self.order {
            self.preloaded[e.idx()] = true;
            out.push(SchedMsg::Preload { expert: e, mask: eit[e.idx()].mask });
        }
        self.scan(&mut out);
        Ok(out)
    }

    /// Chiplets in `done_mask` became idle (bits outside the package are ignored); returns
    /// the grants that become possible. For pulses that may race with grants use
    /// [`Self::release_seen`].
    pub fn release(&mut self, done_mask: u16) -> Vec<SchedMsg> {
        self.icv |= done_mask & all_mask(self.chiplets());
        let mut out = Vec::new();
        self.scan(&mut out);
        out
    }

    /// A done mask sent by chiplets that had received the first `grants_seen` grants of this
    /// layer: bits of chiplets named by a later grant are stale and dropped (see the module
    /// doc), then as [`Self::release`].
    pub fn release_seen(&mut self, done_mask: u16, grants_seen: usize) -> Vec<SchedMsg> {
        let stale = self.grant_log.iter().skip(grants_seen).fold(0u16, |a, &m| a | m);
        self.release(done_mask & !stale)
    }

    /// Grants issued in this layer so far.
    pub fn grants_issued(&self) -> usize {
        self.grant_log.len()
    }

    /// Every scheduled expert of the layer has been granted.
    pub fn is_finished(&self) -> bool {
        self.remaining == 0
    }

    /// Algorithm 1 lines 3–13: grant the first grantable expert in order, rescan from the
    /// head, until none is grantable, ICV is empty, or all are granted.
    fn scan(&mut self, out: &mut Vec<SchedMsg>) {
        'rescan: while self.icv != 0 && self.remaining > 0 {
            for i in 0..self.order.len() {
                let id = self.order[i];
                let e = id.idx();
                if self.granted[e] {
                    continue;
                }
                if !self.preloaded[e] {
                    // Rule 4 for an expert the scan passes or grants (never reached after
                    // begin_layer's preloads; kept as the paper states it).
                    self.preloaded[e] = true;
                    out.push(SchedMsg::Preload { expert: id, mask: self.eit[e].mask });
                }
                let mask = self.eit[e].mask;
                if mask & self.icv != 0 {
                    let start = start_chiplet_fl(mask, self.icv, &self.snake).expect("mask ∩ icv ≠ ∅");
                    out.push(SchedMsg::Grant { expert: id, mask, start });
                    self.grant_log.push(mask);
                    self.icv &= !mask;
                    self.granted[e] = true;
                    self.remaining -= 1;
                    continue 'rescan;
                }
            }
            break;
        }
    }
}

// ---------------------------------------------------------------- Algorithm 2

/// Parameters of token buffering (Algorithm 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenBufferCfgFl {
    /// θ_min: an expert with 0 < n_e < θ_min is cold. 0 = token buffering off: nothing is
    /// deferred and the timers do not move.
    pub theta_min: u32,
    /// N_threshold: completed forward passes that earn one deferral (≥ 1).
    pub n_threshold: u32,
    /// QoS-timer value of a request when it enters (its slot is reset).
    pub t_qos_init: u32,
    /// Slots of the QoS timer bank (requests tracked at once).
    pub slots: u32,
}

impl Default for TokenBufferCfgFl {
    fn default() -> Self {
        TokenBufferCfgFl { theta_min: 0, n_threshold: 5, t_qos_init: 0, slots: 64 }
    }
}

impl TokenBufferCfgFl {
    /// N_threshold for a slack fraction s (the share of a request's completion time it may
    /// spend deferred: 0.1/0.2/0.3 for 10/20/30 %): one deferral (≈ one iteration) per
    /// round(1/s) completed forward passes, so N passes take ≈ N·(1 + s) iterations.
    /// 10 % → 10, 20 % → 5, 30 % → 3.
    pub fn n_threshold_for_slack(slack: f64) -> Result<u32, IoDieError> {
        if !(slack > 0.0 && slack <= 1.0) {
            return Err(IoDieError::Cfg { field: "slack", reason: format!("{slack} is not in (0, 1]") });
        }
        Ok(((1.0 / slack).round() as u32).max(1))
    }

    pub fn validate(&self) -> Result<(), IoDieError> {
        if self.n_threshold == 0 {
            return Err(IoDieError::Cfg { field: "n_threshold", reason: "must be >= 1".into() });
        }
        if self.slots == 0 || self.slots > 1 << 16 {
            return Err(IoDieError::Cfg { field: "slots", reason: format!("{} is not in 1..=65536", self.slots) });
        }
        Ok(())
    }
}

/// One request's gating result at a MoE layer: (expert, home chiplet, tokens) records.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestGatingFl {
    /// The request: its id at the IO die is its slot in the QoS timer bank
    /// (< `TokenBufferCfgFl::slots`).
    pub slot: ReqId,
    /// (expert, home chiplet, tokens).
    pub counts: Vec<(ExpertId, ChipletId, u32)>,
}

impl RequestGatingFl {
    /// From bare numbers: slot, (expert, home chiplet, tokens) records (tests, trace readers).
    pub fn from_raw(slot: u32, counts: &[(u16, u8, u32)]) -> Self {
        RequestGatingFl { slot: ReqId(slot), counts: counts.iter().map(|&(e, c, t)| (ExpertId(e), ChipletId(c), t)).collect() }
    }

    /// A(r): the experts the request activates at this layer (sorted, unique).
    pub fn experts(&self) -> Vec<ExpertId> {
        let mut v: Vec<ExpertId> = self.counts.iter().filter(|x| x.2 > 0).map(|x| x.0).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A(r) as the scheduler's bitmap: bit e of word e / 64 (the QoS step ANDs it with the
    /// cold vector; experts < 256).
    pub fn expert_set(&self) -> [u64; 4] {
        let mut b = [0u64; 4];
        for x in self.experts() {
            b[x.idx() / 64] |= 1 << (x.idx() % 64);
        }
        b
    }
}

/// Checks the records' ranges and returns n_e over all requests.
pub fn totals_fl(reqs: &[RequestGatingFl], experts: usize, chiplets: usize) -> Result<Vec<u32>, IoDieError> {
    if experts > MAX_EXPERTS {
        return Err(IoDieError::TooManyExperts(experts));
    }
    let mut n = vec![0u32; experts];
    for r in reqs {
        for &(e, c, t) in &r.counts {
            if e.idx() >= experts || c.idx() >= chiplets {
                return Err(IoDieError::BadRouting { req: r.slot, expert: e, chiplet: c, experts, chiplets });
            }
            n[e.idx()] = n[e.idx()].checked_add(t).ok_or(IoDieError::Overflow { expert: e })?;
        }
    }
    Ok(n)
}

/// Per-expert per-chiplet token counts of the requests not deferred (`deferred[i]` for
/// `reqs[i]`), the input of [`eit_fl`].
pub fn layer_counts_fl(reqs: &[RequestGatingFl], deferred: &[bool], experts: usize, chiplets: usize) -> Result<Vec<Vec<u32>>, IoDieError> {
    totals_fl(reqs, experts, chiplets)?;
    let mut m = vec![vec![0u32; chiplets]; experts];
    for (r, &d) in reqs.iter().zip(deferred.iter().chain(std::iter::repeat(&false))) {
        if d {
            continue;
        }
        for &(e, c, t) in &r.counts {
            let x = &mut m[e.idx()][c.idx()];
            *x = x.checked_add(t).ok_or(IoDieError::Overflow { expert: e })?;
        }
    }
    Ok(m)
}

/// Token buffering (Algorithm 2) with its QoS timer bank.
///
/// * **C_fw(r)** counts the forward passes r *completed* (it passed its last MoE layer in an
///   iteration) since the last timer increment: call [`TokenBufferFl::forward_pass_done`]
///   once per such pass. An iteration in which r was deferred does not complete a pass, so it
///   does not count — the deferrals stay ≤ 1 per N_threshold passes.
/// * **Slack → N_threshold**: [`TokenBufferCfgFl::n_threshold_for_slack`], round(1/s).
/// * **n_e** in the cold test is the count over *all* active requests before any deferral at
///   this layer (paper: "across all active requests"); every request of the layer is decided
///   against the same n_e, in input order. The EIT is then built from the requests not
///   deferred ([`layer_counts_fl`]), so a deferred request's tokens leave T_e and n_e.
/// * A request is "cold" when some e ∈ A(r) has n_e < θ_min (n_e ≥ 1 since r routes to e).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBufferFl {
    pub cfg: TokenBufferCfgFl,
    /// T_QoS per slot.
    pub t_qos: Vec<u32>,
    /// C_fw per slot.
    pub c_fw: Vec<u32>,
}

impl TokenBufferFl {
    pub fn new(cfg: TokenBufferCfgFl) -> Result<Self, IoDieError> {
        cfg.validate()?;
        let n = cfg.slots as usize;
        Ok(TokenBufferFl { t_qos: vec![cfg.t_qos_init; n], c_fw: vec![0; n], cfg })
    }

    /// A new request takes `slot`: its timer and counter restart.
    pub fn admit(&mut self, slot: ReqId) -> Result<(), IoDieError> {
        let s = self.slot(slot)?;
        self.t_qos[s] = self.cfg.t_qos_init;
        self.c_fw[s] = 0;
        Ok(())
    }

    /// Request in `slot` completed a forward pass.
    pub fn forward_pass_done(&mut self, slot: ReqId) -> Result<(), IoDieError> {
        let s = self.slot(slot)?;
        self.c_fw[s] = self.c_fw[s].saturating_add(1);
        Ok(())
    }

    fn slot(&self, slot: ReqId) -> Result<usize, IoDieError> {
        if slot.idx() < self.t_qos.len() {
            Ok(slot.idx())
        } else {
            Err(IoDieError::BadSlot { slot, slots: self.t_qos.len() })
        }
    }

    /// Algorithm 2 at a MoE layer boundary (after gating, before scheduling): for each request
    /// (`(slot, A(r))`), in order, returns whether it is deferred at this layer. `n_e` = token
    /// counts over all active requests.
    pub fn layer_boundary(&mut self, reqs: &[(ReqId, Vec<ExpertId>)], n_e: &[u32]) -> Result<Vec<bool>, IoDieError> {
        for (slot, _) in reqs {
            self.slot(*slot)?;
        }
        let theta = self.cfg.theta_min;
        if theta == 0 {
            return Ok(vec![false; reqs.len()]);
        }
        Ok(reqs
            .iter()
            .map(|(slot, a)| {
                let s = slot.idx();
                if self.c_fw[s] >= self.cfg.n_threshold {
                    self.t_qos[s] = self.t_qos[s].saturating_add(1);
                    self.c_fw[s] = 0;
                }
                let cold = a.iter().any(|&e| n_e.get(e.idx()).is_some_and(|&n| n < theta));
                if cold && self.t_qos[s] > 0 {
                    self.t_qos[s] -= 1;
                    true
                } else {
                    false
                }
            })
            .collect())
    }
}

/// What the IO die decides at a layer start from request-level gating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerScheduleFl {
    /// Per request (input order): deferred at this layer by token buffering.
    pub deferred: Vec<bool>,
    /// The EIT of the requests kept.
    pub eit: Vec<EitEntryFl>,
    /// Preloads and the first grants ([`TrajectorySchedulerFl::begin_layer`]).
    pub msgs: Vec<SchedMsg>,
}

/// A whole layer at the IO die: Algorithm 2 over the requests, then the EIT of the requests
/// kept, then Algorithm 1's layer start.
pub fn schedule_layer_fl(
    sched: &mut TrajectorySchedulerFl,
    tb: &mut TokenBufferFl,
    reqs: &[RequestGatingFl],
    experts: usize,
    policy: OrderPolicy,
) -> Result<LayerScheduleFl, IoDieError> {
    let n = sched.chiplets();
    let n_e = totals_fl(reqs, experts, n)?;
    let sets: Vec<(ReqId, Vec<ExpertId>)> = reqs.iter().map(|r| (r.slot, r.experts())).collect();
    let deferred = tb.layer_boundary(&sets, &n_e)?;
    let eit = eit_fl(&layer_counts_fl(reqs, &deferred, experts, n)?, n)?;
    let msgs = sched.begin_layer(&eit, policy)?;
    Ok(LayerScheduleFl { deferred, eit, msgs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u8]) -> Vec<ChipletId> {
        v.iter().map(|&c| ChipletId(c)).collect()
    }
    fn exs(v: &[u16]) -> Vec<ExpertId> {
        v.iter().map(|&e| ExpertId(e)).collect()
    }
    const fn c(x: u8) -> ChipletId {
        ChipletId(x)
    }

    #[test]
    fn stage_counts() {
        for (p, s) in [(1, 0), (2, 1), (4, 3), (8, 6), (256, 36)] {
            assert_eq!(bitonic_stages(p).len(), s);
            assert_eq!(bitonic_stage_count(p), s);
        }
    }

    #[test]
    fn snake_and_ring() {
        assert_eq!(snake_order(2, 2), ids(&[0, 1, 3, 2]));
        assert_eq!(snake_order(3, 3), ids(&[0, 1, 2, 5, 4, 3, 6, 7, 8]));
        assert_eq!(ring_fl(0b1011, 2, 2), ids(&[0, 1, 3]));
        assert_eq!(next_hop_fl(0b1011, c(3), 2, 2), Some(c(0)));
        assert_eq!(next_hop_fl(0b0100, c(2), 2, 2), None);
        // Loader of micro-slice k starts at the grant's start chiplet.
        assert_eq!(loader_fl(0b1011, c(1), 0, 2, 2), Some(c(1)));
        assert_eq!(loader_fl(0b1011, c(1), 2, 2, 2), Some(c(0)));
        // Stations of a micro-slice loaded by 1: 1 → 3 → 0, then none.
        assert_eq!(next_station_fl(0b1011, c(1), c(1), 2, 2), Some(c(3)));
        assert_eq!(next_station_fl(0b1011, c(1), c(3), 2, 2), Some(c(0)));
        assert_eq!(next_station_fl(0b1011, c(1), c(0), 2, 2), None);
        // Sharded: helper 2 (snake 0,1,3,2) feeds member 0 first, then 1; 1 is last.
        assert_eq!(shard_loader_fl(3, 2, 2), c(2));
        assert_eq!(shard_next_station_fl(0b0011, c(2), c(2), 2, 2), Some(c(0)));
        assert_eq!(shard_next_station_fl(0b0011, c(2), c(0), 2, 2), Some(c(1)));
        assert_eq!(shard_next_station_fl(0b0011, c(2), c(1), 2, 2), None);
        assert_eq!(shard_next_station_fl(0b0001, c(3), c(3), 2, 2), Some(c(0)));
        assert_eq!(shard_next_station_fl(0b0001, c(3), c(0), 2, 2), None);
    }

    #[test]
    fn paired_interleave() {
        assert_eq!(paired_fl(&exs(&[5, 4, 3, 2, 1])), exs(&[5, 1, 4, 2, 3]));
        assert_eq!(paired_fl(&exs(&[5, 4, 3, 2])), exs(&[5, 2, 4, 3]));
        assert_eq!(paired_fl(&[]), Vec::<ExpertId>::new());
    }
}
