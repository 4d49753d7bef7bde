//! Expert placement and the MoE-layer all-to-all plan (SPEC §4 flow: "the die hosting
//! expert e fetches token t from the nearest die of t's TP group"; docs/wafer-mapping.md).
//!
//! The fetch source is not "nearest of all dies holding the token" but [`Mapping::holder`]:
//! with all-gather that is the host's FTD partner, which is what makes the FTD the
//! communication domain of the all-to-all (paper §IV-A) and keeps the FL decision a pure
//! function of the mapping that the CL dispatch unit can table-look-up.

use super::routing::Routing;
use super::{MapError, Mapping};
use serde::{Deserialize, Serialize};

/// Replicas of each expert: `experts ≥ dies` → expert `e` on die `e % dies` (several experts
/// per die); `experts < dies` → `e` on every die `d` with `d % experts == e` (E/D < 1: the
/// paper's WSC runs EP = dies, and spare dies hold copies). `hosts[e]` is ascending.
pub fn expert_hosts(experts: u32, dies: u32) -> Vec<Vec<u32>> {
    if dies == 0 {
        return vec![Vec::new(); experts as usize];
    }
    if experts >= dies {
        (0..experts).map(|e| vec![e % dies]).collect()
    } else {
        (0..experts).map(|e| (e..dies).step_by(experts as usize).collect()).collect()
    }
}

/// One token's trip between the die holding it and an expert host. Dispatch: `src` = holder →
/// `dst` = host; the combine is the same record with the direction reversed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct A2aXfer {
    pub group: u32,
    pub token: u32,
    pub expert: u32,
    pub src: u32,
    pub dst: u32,
}

impl A2aXfer {
    /// Hops of the transfer on the mapping's mesh.
    pub fn hops(&self, m: &Mapping) -> u32 {
        m.geom.hops(self.src, self.dst)
    }
}

/// The dispatch plan of one MoE layer. `routing[g][t]` = the top-k expert ids of token `t` of
/// group `g`. For every (g, t, e), in that order: the replica host `h` of `e` and its holder
/// `holder(h, g, t % tp)` minimising hops (ties: the lower host id). Entries with
/// `src == dst` are kept (local, 0 hops) so every (token, expert) pair has exactly one record.
///
/// Panics on malformed input (see [`try_dispatch_plan`] for the checked version).
pub fn dispatch_plan(m: &Mapping, hosts: &[Vec<u32>], routing: &Routing) -> Vec<A2aXfer> {
    try_dispatch_plan(m, hosts, routing).unwrap_or_else(|e| panic!("dispatch_plan: {e}"))
}

/// Which replica of an expert serves a token when the expert has several hosts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaSplit {
    /// The replica nearest the token's holder (ties: the lower host id) — the dispatch rule
    /// "fetch from the nearest die" applied to replicas; a replica next to many holders can
    /// get most of an expert's tokens.
    #[default]
    Nearest,
    /// MoEntwine Algorithm 1's assumption (moentwine.txt L210: "Load_e/Num_e represents the
    /// per-device load when shared"): the tokens of expert e are dealt to its `Num_e`
    /// replicas in turn (the i-th token of e, in (group, token) order, to replica
    /// `i mod Num_e` of the ascending host list), so every replica gets Load_e/Num_e of them,
    /// rounded, the shares differing by at most one token. Each token is then fetched from
    /// its holder nearest that replica, as for `Nearest`.
    Even,
}

impl ReplicaSplit {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaSplit::Nearest => "nearest",
            ReplicaSplit::Even => "even",
        }
    }
    pub fn is_nearest(&self) -> bool {
        *self == ReplicaSplit::Nearest
    }
}

impl std::str::FromStr for ReplicaSplit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "nearest" => Ok(ReplicaSplit::Nearest),
            "even" => Ok(ReplicaSplit::Even),
            other => Err(format!("unknown replica split `{other}` (expected nearest or even)")),
        }
    }
}

/// [`try_dispatch_plan`] with the replica rule `split` (`Nearest` is [`try_dispatch_plan`]).
pub fn try_dispatch_plan_split(m: &Mapping, hosts: &[Vec<u32>], routing: &Routing, split: ReplicaSplit) -> Result<Vec<A2aXfer>, MapError> {
    match split {
        ReplicaSplit::Nearest => try_dispatch_plan(m, hosts, routing),
        ReplicaSplit::Even => {
            // The nearest plan does every input check and fixes the record order; only the
            // replica (and so the holder it fetches from) changes.
            let mut out = try_dispatch_plan(m, hosts, routing)?;
            let mut dealt = vec![0u64; hosts.len()];
            for a in out.iter_mut() {
                let hs = &hosts[a.expert as usize];
                if hs.len() < 2 {
                    continue;
                }
                let i = &mut dealt[a.expert as usize];
                let h = hs[(*i % hs.len() as u64) as usize];
                *i += 1;
                a.dst = h;
                a.src = m.holder(h, a.group, a.token % m.tp);
            }
            Ok(out)
        }
    }
}

/// [`dispatch_plan`] with its input checks as errors: more routing groups than `dp`, an expert
/// id without hosts, a host outside the mesh.
pub fn try_dispatch_plan(m: &Mapping, hosts: &[Vec<u32>], routing: &Routing) -> Result<Vec<A2aXfer>, MapError> {
    if routing.len() > m.dp as usize {
        return Err(MapError::new("routing", format!("{} groups but the mapping has dp = {}", routing.len(), m.dp)));
    }
    let dies = m.geom.dies();
    for (e, hs) in hosts.iter().enumerate() {
        if let Some(&bad) = hs.iter().find(|&&h| h >= dies) {
            return Err(MapError::new("hosts", format!("expert {e}: host {bad} outside the {dies} dies")));
        }
    }
    let mut out = Vec::new();
    for (g, toks) in routing.iter().enumerate() {
        for (t, experts) in toks.iter().enumerate() {
            for &e in experts {
                let hs = hosts.get(e.idx()).filter(|h| !h.is_empty()).ok_or_else(|| {
                    MapError::new("routing", format!("group {g} token {t}: expert {e} has no host ({} experts placed)", hosts.len()))
                })?;
                let slice = t as u32 % m.tp;
                let (mut best_h, mut best_src, mut best_d) = (u32::MAX, 0, u32::MAX);
                for &h in hs {
                    let src = m.holder(h, g as u32, slice);
                    let d = m.geom.hops(src, h);
                    if d < best_d || (d == best_d && h < best_h) {
                        (best_h, best_src, best_d) = (h, src, d);
                    }
                }
                out.push(A2aXfer { group: g as u32, token: t as u32, expert: e.0 as u32, src: best_src, dst: best_h });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement() {
        assert_eq!(expert_hosts(4, 8), vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
        assert_eq!(expert_hosts(6, 4), vec![vec![0], vec![1], vec![2], vec![3], vec![0], vec![1]]);
        assert_eq!(expert_hosts(3, 8), vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]);
    }

    /// Load_e/Num_e, against a naive count: every expert's tokens are all served, each
    /// replica of e gets floor or ceil of Load_e/Num_e, and each record fetches from the
    /// holder of its token nearest its replica.
    #[test]
    fn even_split_is_load_over_num() {
        let m = crate::wafer::map(crate::wafer::MappingKind::Er, crate::wafer::WaferGeom::single(4, 4), 4, 4, true).unwrap();
        // 3 experts on 16 dies: 6, 5, 5 replicas (expert_hosts' E/D < 1 placement).
        let hosts = expert_hosts(3, 16);
        let groups: Vec<Vec<Vec<u16>>> = (0..4).map(|g| (0..37).map(|t| vec![((g * 7 + t) % 3) as u16, ((g + t * 5 + 1) % 3) as u16]).collect()).collect();
        let routing = Routing::from_raw(groups);
        let plan = try_dispatch_plan_split(&m, &hosts, &routing, ReplicaSplit::Even).unwrap();
        let nearest = try_dispatch_plan(&m, &hosts, &routing).unwrap();
        assert_eq!(plan.len(), nearest.len());
        for e in 0..3u32 {
            let load = plan.iter().filter(|a| a.expert == e).count();
            let n = hosts[e as usize].len();
            let per: Vec<usize> = hosts[e as usize].iter().map(|&h| plan.iter().filter(|a| a.expert == e && a.dst == h).count()).collect();
            assert_eq!(per.iter().sum::<usize>(), load, "expert {e}: shares sum to Load_e");
            let (lo, hi) = (load / n, load.div_ceil(n));
            assert!(per.iter().all(|&c| c == lo || c == hi), "expert {e}: shares {per:?} not within floor/ceil of {load}/{n}");
            assert!(per.iter().max().unwrap() - per.iter().min().unwrap() <= 1);
        }
        for a in &plan {
            assert_eq!(a.src, m.holder(a.dst, a.group, a.token % m.tp));
        }
        // One replica per expert: the two rules agree.
        let one = expert_hosts(32, 16);
        let r1 = Routing::from_raw(vec![(0..20).map(|t| vec![(t % 32) as u16]).collect(); 4]);
        assert_eq!(try_dispatch_plan_split(&m, &one, &r1, ReplicaSplit::Even).unwrap(), try_dispatch_plan(&m, &one, &r1).unwrap());
    }
}
