//! Building a package for one layer, in named steps: check the layer, plan it (placement,
//! token buffering, the layer plan), size the micro-slices, allocate the links at their
//! receivers, build the IO die, each chiplet tile, the partitions, and the run's context.
//!
//! The order of the steps is the order of their errors and of the link allocation (link ids,
//! adapter indices and seeds follow it), so it is fixed.

use std::collections::HashMap;
use std::sync::Arc;

use sched::noc::{Coord, Dir};
use sched::pkg::iodie::{eit_fl, TokenBufferCfgFl};
use sched::pkg::moe::ExpertWeights;

use super::chiplet::{ChipletCtrlCl, ChipletCtrlModel, ChipletId, CtrlKnobs, ExpertId};
use super::config::{Loaders, PkgCfg, PkgTiming, ShardFlow, Strategy};
use super::ddr::{DdrChannelCl, DdrPorts, DdrReq, DdrResp};
use super::iodie::{IoDieCfg, IoDieFactory, IoDieModel, IoDiePorts, IoDieSchedulerCl, LayerStart, OrderPolicy, SchedMsgCl};
use super::layer::{Buffering, LayerInput};
use super::ni::{D2dEngineCl, NiPorts, PacketKind, PayloadPools};
use super::package::{IoDieTile, Package, PkgError, PkgPart, PkgRtl};
use super::pe_array::PeArrayCl;
use super::plan::LayerPlan;
use super::ring::SlotTag;
use super::rule5::{ArbiterPorts, LoadArbiterCl};
use super::chiplet::FreeReport;
use super::tile::{ChipletTile, TileLinks, TileWork};
use super::traj::PkgTraj;
use super::ucie::{UcieAdapterCl, UciePorts};
use super::wires::{FuncData, PkgCtx, PkgWires};
use crate::cfg::CfgError;
use crate::harness::{AllToAll, LandingMarks, LinkArena, LinkId, WakeOffsets, WakeSet};
use crate::noc::flit::{Credit, Flit};
use crate::noc::router::{RouterCl, RouterPorts, NPORTS};

impl Package {
    /// Builds the package for `layer` under `strategy`; `functional` moves real int8 data.
    pub fn new(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool) -> Result<Package, PkgError> {
        Self::new_with(cfg, strategy, layer, functional, None)
    }

    /// As [`Package::new`], with the IO-die scheduler built by `rtl_iodie` in place of the CL
    /// model (`--rtl scheduler`).
    pub fn new_with(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool, rtl_iodie: Option<IoDieFactory>) -> Result<Package, PkgError> {
        Self::new_with_blocks(cfg, strategy, layer, functional, PkgRtl { iodie: rtl_iodie, ctrl: None, pe: None })
    }

    /// As [`Package::new`], with the RTL stand-ins of `rtl` in place of their CL models.
    pub fn new_with_blocks(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool, rtl: PkgRtl) -> Result<Package, PkgError> {
        Self::new_predicted(cfg, strategy, layer, None, functional, rtl)
    }

    /// As [`Package::new_with_blocks`], with the experts' token counts `predicted` for this
    /// layer from earlier layer batches of the run (`hw::pkg::session::Session::predicted`),
    /// which the paper's Hydra places by ([`Strategy::Hydra`]; ignored by the others).
    pub fn new_predicted(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, predicted: Option<&[u64]>, functional: bool, rtl: PkgRtl) -> Result<Package, PkgError> {
        cfg.validate()?;
        // The machine of the strategy (the paper's EP: whole-expert slices; the config
        // itself for every other strategy).
        let cfg = &*cfg.for_strategy(strategy);
        cfg.validate_for(layer.d_ffn)?;
        check_layer(layer, functional)?;
        rtl.check(functional).map_err(PkgError::Input)?;
        let n = cfg.chiplets() as usize;
        let (rows, cols) = (cfg.rows as usize, cfg.cols as usize);
        // --- clocks: core, UCIe, DDR, and every link latency in ticks (checked by validate)
        let timing = cfg.timing()?;
        let (core, ucie, ddr) = (timing.core, timing.ucie, timing.ddr);
        let planned = PlannedLayer::of(cfg, strategy, layer, predicted, n)?;
        let slices = Slices::of(cfg, layer)?;
        let links = PkgLinks::alloc(cfg, &timing, n);
        // Sharded loading (FSE-DP strategies): every chiplet loads and forwards, so the
        // scheduler's messages go to all of them.
        let sharded = cfg.loaders == Loaders::All && strategy.streams_experts();
        let io = build_iodie(rows, cols, strategy, layer, &timing, &links, &planned, sharded, rtl.iodie)?;
        // --- chiplets
        let knobs = CtrlKnobs { helpers: sharded, shard_reserve: sharded && cfg.shard_flow == ShardFlow::Reserve, ..strategy.knobs(cfg.ddr_reserve) };
        let m = cfg.micro_slices as usize;
        let m_of: Vec<u16> = (0..layer.experts).map(|e| if planned.plan.tokens(e) > 0 { m as u16 } else { 0 }).collect();
        let mut tiles = Vec::with_capacity(n);
        let mut adapter_idx = 0u32;
        for i in 0..n {
            let sb = if functional { slices.slot_bytes } else { 0 };
            tiles.push(build_tile(i, cfg, layer, &timing, &links, &planned.plan, &m_of, knobs, slices.slots, sb, functional, &rtl, &mut adapter_idx)?);
        }
        // Rule 5 (A4): the load arbiter; a claim waits for the status that reflects the
        // previous one (load link + status link + 1 cycle).
        let rule5 = (strategy == Strategy::A4).then(|| LoadArbiterCl::new(n, m_of.clone(), PkgTraj::new(rows, cols), core, ArbiterPorts { status_in: &links.status_l, load_out: &links.load_l }, 5));
        let parts = partitions(cfg, tiles, IoDieTile { sched: io, rule5, wake: WakeSet::default(), done_in: links.done_in.clone() }, &links.core_wake);
        let func = functional.then(|| func_data(cfg, layer, m));
        let pools = if functional {
            // Every flit that can be in flight from one sender: all buffers of the package.
            let r = &cfg.router;
            let per = (n * (NPORTS + 1) * (r.vcs * r.vc_buf) as usize + 64).next_power_of_two() * 4;
            PayloadPools::new(n, per, cfg.flit_bytes as usize)
        } else {
            PayloadPools::new(0, 0, cfg.flit_bytes as usize)
        };
        let ctx = PkgCtx {
            traj: if sharded { PkgTraj::new(rows, cols).sharded() } else { PkgTraj::new(rows, cols) },
            core,
            ucie,
            ddr,
            ucie_ahead: timing.ucie_runs_ahead() && cfg.ucie.ber == 0.0,
            d_model: layer.d_model,
            micro_slices: m as u16,
            slice_f: slices.slice_f,
            slice_bytes: slices.slice_bytes,
            slot_bytes: slices.slot_bytes,
            act_bytes: cfg.act_bytes,
            out_bytes: cfg.out_bytes,
            ddr_burst_bytes: cfg.ddr.burst_bytes() as u64,
            flit_bytes: cfg.flit_bytes as u64,
            func,
        };
        let mut pkg = Package {
            cfg: cfg.clone(),
            strategy,
            parts,
            wires: links.into_wires(pools),
            ctx,
            clocks: timing.clocks,
            plan: planned.plan,
            routing: planned.routing,
            buffering: planned.buffering,
            now: 0,
            evaluated: 0,
            check_trace_skips: false,
        };
        if cfg.sim.timeline {
            pkg.enable_timeline();
        }
        Ok(pkg)
    }
}

/// The layer is one the package can run (experts within the IO die's EIT, tokens routed to
/// existing experts, functional mode only for small layers).
fn check_layer(layer: &LayerInput, functional: bool) -> Result<(), PkgError> {
    if layer.experts == 0 || layer.experts > sched::pkg::iodie::MAX_EXPERTS {
        return Err(PkgError::Input(format!("{} experts: the IO die's EIT holds 1..={}", layer.experts, sched::pkg::iodie::MAX_EXPERTS)));
    }
    if layer.routing.is_empty() {
        return Err(PkgError::Input("no tokens in the layer".into()));
    }
    for (t, es) in layer.routing.iter().enumerate() {
        if let Some(&e) = es.iter().find(|&&e| e as usize >= layer.experts) {
            return Err(PkgError::Input(format!("token {t} routed to expert {e} of {}", layer.experts)));
        }
    }
    if layer.d_model == 0 || layer.d_ffn == 0 {
        return Err(PkgError::Input("d_model and d_ffn must be at least 1".into()));
    }
    if functional && (layer.d_model as u64 * layer.d_ffn as u64 > 1 << 20 || layer.routing.len() > 1 << 16) {
        return Err(PkgError::Input(format!(
            "functional mode is for small layers (d_model·d_ffn ≤ 2^20, ≤ 65536 tokens); got {}×{} and {} tokens",
            layer.d_model,
            layer.d_ffn,
            layer.routing.len()
        )));
    }
    Ok(())
}

/// The layer as this run computes it: the EP-family placement, token buffering's decision (A5)
/// and the layer plan over the tokens not deferred.
struct PlannedLayer {
    tb_cfg: TokenBufferCfgFl,
    buffering: Option<Buffering>,
    /// Tokens computed in this run (a deferred request's tokens have no experts here).
    routing: Vec<Vec<u16>>,
    plan: LayerPlan,
}

impl PlannedLayer {
    fn of(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, predicted: Option<&[u64]>, n: usize) -> Result<Self, PkgError> {
        // The layer plan: placement for the EP family.
        let ep = || sched::pkg::placement::ep_placement_fl(layer.experts, n).map_err(|e| PkgError::Input(e.to_string()));
        let owner = match strategy {
            Strategy::Ep | Strategy::EpPaper => Some(ep()?),
            // The paper's Hydra: balance the predicted load; with no history, EP's placement.
            Strategy::Hydra => match predicted {
                Some(p) if p.len() == layer.experts => Some(sched::pkg::placement::hydra_placement_fl(p, n).map_err(|e| PkgError::Input(e.to_string()))?),
                Some(p) => return Err(PkgError::Input(format!("{} predicted expert counts for {} experts", p.len(), layer.experts))),
                None => Some(ep()?),
            },
            Strategy::HydraOracle => {
                let mut load = vec![0u64; layer.experts];
                for es in &layer.routing {
                    for &e in es {
                        load[e as usize] += 1;
                    }
                }
                Some(sched::pkg::placement::hydra_placement_fl(&load, n).map_err(|e| PkgError::Input(e.to_string()))?)
            }
            _ => None,
        };
        // Token buffering (A5): Algorithm 2 decides which requests wait at this layer;
        // their tokens keep their homes but compute nothing in this run.
        let tb_cfg = cfg.token_buffer_cfg(strategy)?;
        let buffering = match &layer.requests {
            Some(rq) if tb_cfg.theta_min > 0 => Some(Buffering::decide(layer, rq, &tb_cfg, n).map_err(|e| PkgError::Input(e.to_string()))?),
            _ => None,
        };
        let routing: Vec<Vec<u16>> = match &buffering {
            Some(b) => layer.routing.iter().zip(&b.req_of_token).map(|(es, &r)| if b.deferred[r] { Vec::new() } else { es.clone() }).collect(),
            None => layer.routing.clone(),
        };
        let plan = LayerPlan::build(&routing, layer.experts, n, strategy, owner);
        Ok(PlannedLayer { tb_cfg, buffering, routing, plan })
    }
}

/// Micro-slice sizes: FFN columns and bytes of each, the largest (a ring slot) and how many
/// slots the weight buffer holds.
struct Slices {
    slice_f: Vec<u32>,
    slice_bytes: Vec<u32>,
    slot_bytes: usize,
    slots: u32,
}

impl Slices {
    fn of(cfg: &PkgCfg, layer: &LayerInput) -> Result<Self, PkgError> {
        let m = cfg.micro_slices as usize;
        let slice_f: Vec<u32> = (0..m).map(|k| ExpertWeights::slice_cols(layer.d_ffn as usize, k, m).len() as u32).collect();
        let slice_bytes: Vec<u32> = slice_f.iter().map(|&f| 3 * layer.d_model * f).collect();
        let slot_bytes = *slice_bytes.iter().max().unwrap() as usize;
        let slots = cfg.slots_for(slot_bytes as u64);
        if slots <= cfg.ddr_reserve {
            return Err(CfgError { field: "weight_buffer_bytes".into(), reason: format!("holds {slots} micro-slices of {slot_bytes} bytes; need more than ddr_reserve ({})", cfg.ddr_reserve) }.into());
        }
        Ok(Slices { slice_f, slice_bytes, slot_bytes, slots })
    }
}

/// Neighbour on the k×k chiplet array (the mesh's own function).
fn neighbour(i: u32, d: Dir, k: u32) -> Option<u32> {
    crate::noc::mesh::neighbour_in(i, d, k, k)
}

/// The package's link arenas and each chiplet's link ids, allocated at their receivers.
struct PkgLinks {
    inbox: Arc<LandingMarks>,
    flits: LinkArena<Flit>,
    credits: LinkArena<Credit>,
    msgs: LinkArena<SchedMsgCl>,
    done: LinkArena<u16>,
    ddr_req: LinkArena<DdrReq>,
    ddr_resp: LinkArena<DdrResp>,
    /// The control sideband, chiplet to chiplet: hand-offs, flow control's fetches, slot
    /// requests.
    handoff: AllToAll<SlotTag>,
    fetch: AllToAll<SlotTag>,
    slot_req: AllToAll<SlotTag>,
    status: LinkArena<FreeReport>,
    loads: LinkArena<SlotTag>,
    /// Per chiplet and router port: flit and credit inputs, and the adapter input of a
    /// die-to-die output.
    flit_in: Vec<[LinkId; NPORTS]>,
    credit_in: Vec<[LinkId; NPORTS]>,
    ucie_in: Vec<[LinkId; NPORTS]>,
    /// Per chiplet: the D2D engine's ejection flits and injection credits.
    ej: Vec<LinkId>,
    inj_credit: Vec<LinkId>,
    msg_in: Vec<LinkId>,
    done_in: Vec<LinkId>,
    ddr_req_l: Vec<LinkId>,
    ddr_resp_l: Vec<LinkId>,
    status_l: Vec<LinkId>,
    load_l: Vec<LinkId>,
    /// Landing offsets of core-edge sends (see [`PkgPart::core_wake`]); the DDR request's
    /// crossing is added where it is sent.
    core_wake: WakeOffsets,
}

impl PkgLinks {
    fn alloc(cfg: &PkgCfg, timing: &PkgTiming, n: usize) -> Self {
        let k = cfg.cols;
        let tk = timing.tk;
        let (core, ddr) = (timing.core, timing.ddr);
        let st = cfg.router.st_delay as u64;
        let credit_lat = timing.credit_lat; // sideband credits land on a core edge
        let cl = |c: u64| timing.cl(c) as u32; // core cycles → ticks (validate bounds them)
        // Per tile, a landing mark for any value that lands on it from outside the tile (a
        // neighbour's adapter or router, the IO die, another chiplet's sideband) or on its
        // router's inputs: a tile with nothing due sleeps until one lands (package.rs), and
        // the router is polled only when one does.
        let inbox = Arc::new(LandingMarks::new(n, (1 + tk as u32).max(credit_lat as u32).max(cl(2))));
        let mut flits = LinkArena::<Flit>::with_marks(inbox.clone());
        let mut credits = LinkArena::<Credit>::with_marks(inbox.clone());
        let mut msgs = LinkArena::<SchedMsgCl>::with_marks(inbox.clone());
        let mut done = LinkArena::<u16>::new();
        let mut ddr_req = LinkArena::<DdrReq>::new();
        let mut ddr_resp = LinkArena::<DdrResp>::new();
        let mut flit_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut credit_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut ucie_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut ej = vec![LinkId::NONE; n];
        let mut inj_credit = vec![LinkId::NONE; n];
        for i in 0..n {
            // The router's inputs, flits and credits, each as one group (their stamps of a
            // cycle in one cache line, as the mesh's: `LinkArena::add_group`): the D2D
            // engine's, and from each neighbour's adapter (a crossing into the core domain).
            let ports: Vec<Dir> = Dir::ALL.into_iter().filter(|&d| d == Dir::Local || neighbour(i as u32, d, k).is_some()).collect();
            let f = flits.add_group_cdc(&ports.iter().map(|&d| if d == Dir::Local { (cl(2), 0) } else { (1, tk as u32) }).collect::<Vec<_>>());
            let c = credits.add_group(&ports.iter().map(|&d| if d == Dir::Local { cl(2) } else { credit_lat as u32 }).collect::<Vec<_>>());
            for (j, &d) in ports.iter().enumerate() {
                let p = d.idx();
                // Every router input stamps the tile's mark, the D2D engine's too: the
                // router polls its inputs only at a tick whose mark says something lands
                // (`RouterCl::eval_if`). (The D2D engine's sends land at ticks the tile is
                // awake anyway: its send wakes it.)
                flit_in[i][p] = flits.marked(f[j], i);
                credit_in[i][p] = credits.marked(c[j], i);
                if d != Dir::Local {
                    // Adapter input of my output p: the router's switch traversal.
                    ucie_in[i][p] = flits.add(cl(st));
                }
            }
            ej[i] = flits.add(cl(st + 2));
            inj_credit[i] = credits.add(cl(2));
        }
        let msg_in: Vec<LinkId> = (0..n)
            .map(|i| {
                let id = msgs.add(cl(2));
                msgs.marked(id, i)
            })
            .collect();
        let done_in: Vec<LinkId> = (0..n).map(|_| done.add(cl(2))).collect();
        let ddr_req_l: Vec<LinkId> = (0..n).map(|_| ddr_req.add_cdc(1, ddr.div as u32)).collect();
        let ddr_resp_l: Vec<LinkId> = (0..n).map(|_| ddr_resp.add_cdc(1, core.div as u32)).collect();
        let handoff = AllToAll::<SlotTag>::new(n, cl(2), Some(inbox.clone()));
        let fetch = AllToAll::<SlotTag>::new(n, cl(2), Some(inbox.clone()));
        let slot_req = AllToAll::<SlotTag>::new(n, cl(2), Some(inbox.clone()));
        let mut status = LinkArena::<FreeReport>::new();
        let mut loads = LinkArena::<SlotTag>::with_marks(inbox.clone());
        let status_l: Vec<LinkId> = (0..n).map(|_| status.add(cl(2))).collect();
        let load_l: Vec<LinkId> = (0..n)
            .map(|i| {
                let id = loads.add(cl(2));
                loads.marked(id, i)
            })
            .collect();
        let core_wake = WakeOffsets::of([tk, cl(2) as u64, cl(st) as u64, cl(st + 2) as u64, credit_lat]);
        PkgLinks {
            inbox,
            flits,
            credits,
            msgs,
            done,
            ddr_req,
            ddr_resp,
            handoff,
            fetch,
            slot_req,
            status,
            loads,
            flit_in,
            credit_in,
            ucie_in,
            ej,
            inj_credit,
            msg_in,
            done_in,
            ddr_req_l,
            ddr_resp_l,
            status_l,
            load_l,
            core_wake,
        }
    }

    /// The arenas, shared by the partitions.
    fn into_wires(self, pools: PayloadPools) -> PkgWires {
        let PkgLinks { inbox, flits, credits, msgs, done, ddr_req, ddr_resp, handoff, fetch, slot_req, status, loads, .. } = self;
        PkgWires { inbox, flits, credits, msgs, done, ddr_req, ddr_resp, handoff, fetch, slot_req, status, loads, pools }
    }

    /// Chiplet `i`'s ends of the control links.
    fn tile_links(&self, i: usize) -> TileLinks {
        TileLinks {
            msg_in: self.msg_in[i],
            done_out: self.done_in[i],
            ddr_req_out: self.ddr_req_l[i],
            ddr_resp_in: self.ddr_resp_l[i],
            status_out: self.status_l[i],
            load_in: self.load_l[i],
        }
    }
}

/// Expert order of the IO die per strategy.
fn policy(s: Strategy) -> OrderPolicy {
    match s {
        Strategy::A3 | Strategy::A4 | Strategy::A5 => OrderPolicy::Paired,
        _ => OrderPolicy::ById,
    }
}

/// The IO die's scheduler, with the layer begun: the CL model checks the layer (its EIT, or
/// the requests and QoS bank under token buffering); a stand-in (`rtl_iodie`) gets the same
/// start.
#[allow(clippy::too_many_arguments)]
fn build_iodie(
    rows: usize,
    cols: usize,
    strategy: Strategy,
    layer: &LayerInput,
    timing: &PkgTiming,
    links: &PkgLinks,
    planned: &PlannedLayer,
    sharded: bool,
    rtl_iodie: Option<IoDieFactory>,
) -> Result<Box<dyn IoDieModel>, PkgError> {
    let n = rows * cols;
    let core = timing.core;
    let io_cfg = IoDieCfg { policy: policy(strategy), experts: layer.experts as u32, done_fifo: 32, token_buffer: planned.tb_cfg.clone(), broadcast: sharded };
    let io_ports = IoDiePorts { msg_out: links.msg_in.clone(), done_in: links.done_in.clone() };
    let mut io = IoDieSchedulerCl::new(rows, cols, &io_cfg, core, io_ports.clone())?;
    let start = match (&planned.buffering, &layer.requests) {
        (Some(b), Some(rq)) => {
            io.load_qos(&rq.bank.t_qos, &rq.bank.c_fw).map_err(|e| PkgError::Input(e.to_string()))?;
            io.begin_layer_requests(0, &b.reqs).map_err(|e| PkgError::Input(e.to_string()))?;
            rtl_iodie.map(|_| LayerStart::Requests { t_qos: rq.bank.t_qos.clone(), c_fw: rq.bank.c_fw.clone(), reqs: b.reqs.clone() })
        }
        _ => {
            let eit = eit_fl(planned.plan.counts(), n).map_err(|e| PkgError::Input(e.to_string()))?;
            io.begin_layer(0, &eit).map_err(|e| PkgError::Input(e.to_string()))?;
            rtl_iodie.map(|_| LayerStart::Eit(eit))
        }
    };
    // The CL model checked the layer; a stand-in gets the same start (built only for one).
    Ok(match (rtl_iodie, start) {
        (Some(f), Some(start)) => f(rows, cols, &io_cfg, core, io_ports, &start).map_err(|e| PkgError::Input(format!("--rtl scheduler: {e}")))?,
        _ => Box::new(io),
    })
}

/// Chiplet `i`: its router and the UCIe adapters of its outgoing die-to-die links (numbered
/// on from `adapter_idx`), D2D engine with the EP dispatch queued, controller (or its
/// stand-in) with the layer begun, PE array, DDR channel, and this layer's work.
#[allow(clippy::too_many_arguments)]
fn build_tile(
    i: usize,
    cfg: &PkgCfg,
    layer: &LayerInput,
    timing: &PkgTiming,
    links: &PkgLinks,
    plan: &LayerPlan,
    m_of: &[u16],
    knobs: CtrlKnobs,
    slots: u32,
    sb: usize,
    functional: bool,
    rtl: &PkgRtl,
    adapter_idx: &mut u32,
) -> Result<ChipletTile, PkgError> {
    let (rows, cols, k) = (cfg.rows as usize, cfg.cols as usize, cfg.cols);
    let (core, ucie, ddr, tk) = (timing.core, timing.ucie, timing.ddr, timing.tk);
    let r = &cfg.router;
    let c = i as u8;
    let coord = Coord::of(i as u32, k);
    let mut ports = RouterPorts { in_flit: links.flit_in[i], out_flit: [LinkId::NONE; NPORTS], in_credit: links.credit_in[i], out_credit: [LinkId::NONE; NPORTS] };
    let mut adapters = Vec::new();
    for d in Dir::ALL {
        let p = d.idx();
        if d == Dir::Local {
            ports.out_flit[p] = links.ej[i];
            ports.out_credit[p] = links.inj_credit[i];
        } else if let Some(nb) = neighbour(i as u32, d, k) {
            let q = d.opposite().idx();
            ports.out_flit[p] = links.ucie_in[i][p];
            ports.out_credit[p] = links.credit_in[nb as usize][q];
            let a = UcieAdapterCl::new(*adapter_idx, &cfg.ucie, cfg.seed, ucie, core, UciePorts { in_flit: links.ucie_in[i][p], out_flit: links.flit_in[nb as usize][q] }, timing.tick_ps);
            *adapter_idx += 1;
            adapters.push((d.short(), a));
        }
    }
    let mut router = RouterCl::new(i as u32, k, r, 1, ports);
    router.set_ticks_per_cycle(tk);
    let np = NiPorts { inj_flit: links.flit_in[i][Dir::Local.idx()], inj_credit: links.inj_credit[i], ej_flit: links.ej[i], ej_credit: links.credit_in[i][Dir::Local.idx()] };
    // The plan and DDR model speak bare chiplet numbers; the chiplet's blocks take the typed id.
    let cid = ChipletId(c);
    let mut ni = D2dEngineCl::new(cid, k, r.vcs, r.vc_buf, cfg.flit_bytes, np);
    ni.set_ticks_per_cycle(tk);
    let mut ctrl: Box<dyn ChipletCtrlModel> = match rtl.ctrl {
        Some(f) => f(cid, rows, cols, layer.experts, slots, sb, knobs).map_err(|e| PkgError::Input(format!("--rtl chiplet-ctrl: {e}")))?,
        None => Box::new(ChipletCtrlCl::new(cid, layer.experts, slots, sb, knobs)),
    };
    // Tokens computed here, EP dispatch in/out.
    let m_here: Vec<u32> = (0..layer.experts).map(|e| plan.count[e][i]).collect();
    let tokens_here: Vec<Vec<u32>> = if functional { (0..layer.experts).map(|e| plan.tokens_of(&layer.routing, e as u16, c)).collect() } else { Vec::new() };
    let mut missing = vec![0u32; layer.experts];
    let mut out_groups: HashMap<(u16, u8), u32> = HashMap::new();
    let mut combine_to = vec![Vec::new(); layer.experts];
    let mut combine_groups: HashMap<(u16, u8), u32> = HashMap::new();
    for &(_, e, from, to) in &plan.dispatch {
        if to == c {
            missing[e as usize] += 1;
            *combine_groups.entry((e, from)).or_default() += 1;
        }
        if from == c {
            *out_groups.entry((e, to)).or_default() += 1;
        }
    }
    let mut og: Vec<_> = out_groups.into_iter().collect();
    og.sort();
    for ((e, to), cnt) in &og {
        ni.queue_tokens(PacketKind::Dispatch, ExpertId(*e), *cnt, *cnt as usize * layer.d_model as usize * cfg.act_bytes as usize, ChipletId(*to));
    }
    let mut cg: Vec<_> = combine_groups.into_iter().collect();
    cg.sort();
    for ((e, from), cnt) in cg {
        combine_to[e as usize].push((ChipletId(from), cnt));
    }
    // Combine packets this chiplet receives: one per (expert, owner) of its dispatched tokens.
    let combines_expected = og.len() as u32;
    ctrl.begin_layer(m_of, &missing);
    let grants_expected = (0..layer.experts).filter(|&e| plan.mask(e) >> i & 1 == 1).count() as u32;
    let home_tokens = plan.home.iter().filter(|&&h| h == c).count() as u32;
    let out_tokens = m_here.iter().sum::<u32>();
    let pe = PeArrayCl::new(&cfg.pe, core)?;
    // `--rtl pe`: the functional arithmetic on the RTL array (`PkgRtl::check` refused it in
    // timing mode, which moves no data).
    let pe_compute = match rtl.pe {
        Some(f) => Some(f(&cfg.pe).map_err(|e| PkgError::Input(format!("--rtl pe: {e}")))?),
        None => None,
    };
    let ddr_ch = DdrChannelCl::new(c, &cfg.ddr, ddr, core, DdrPorts { req_in: links.ddr_req_l[i], resp_out: links.ddr_resp_l[i] });
    let work = TileWork { m_here, tokens_here, combine_to, grants_expected, combines_expected, home_tokens, out_tokens };
    let scope = format!("top.pkg.c_{}_{}", coord.y, coord.x);
    let mut tile = ChipletTile::new(cid, scope, router, ni, ctrl, pe, ddr_ch, adapters, links.tile_links(i), work, cfg.ddr.queue_depth);
    tile.pe_compute = pe_compute;
    Ok(tile)
}

/// Bands of chiplets, one per thread (at most one per chiplet); the IO die rides with the
/// first.
fn partitions(cfg: &PkgCfg, tiles: Vec<ChipletTile>, iodie: IoDieTile, core_wake: &WakeOffsets) -> Vec<PkgPart> {
    let n = tiles.len();
    let threads = (cfg.sim.threads as usize).clamp(1, n);
    let mut parts = Vec::with_capacity(threads);
    let mut it = tiles.into_iter();
    let mut first = 0;
    let mut io = Some(iodie);
    for p in 0..threads {
        let take = (n - first) / (threads - p);
        parts.push(PkgPart { tiles: it.by_ref().take(take).collect(), iodie: if p == 0 { io.take() } else { None }, log: None, core_wake: core_wake.clone(), sleep: true, io_seen: None, tape_next: crate::harness::NEVER });
        first += take;
    }
    parts
}

/// Functional data: every expert's generated weights, its micro-slices as bytes (the DDR
/// image) and the token activations.
fn func_data(cfg: &PkgCfg, layer: &LayerInput, m: usize) -> FuncData {
    let d = layer.d_model as usize;
    let weights: Vec<ExpertWeights> = (0..layer.experts as u32).map(|e| ExpertWeights::generate(cfg.seed, e, d, layer.d_ffn as usize)).collect();
    let image = weights.iter().map(|w| (0..m).map(|k| w.micro_slice(k, m).to_bytes()).collect()).collect();
    let x = sched::pkg::moe::generate_tokens(cfg.seed, layer.routing.len(), d);
    FuncData { x, image, weights }
}
