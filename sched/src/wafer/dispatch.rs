//! Expert placement and the MoE-layer all-to-all plan (SPEC §4 flow: "the die hosting
//! expert e fetches token t from the nearest die of t's TP group"; docs/wafer-mapping.md).
//!
//! The fetch source is not "nearest of all dies holding the token" but [`Mapping::holder`]:
//! with all-gather that is the host's FTD partner, which is what makes the FTD the
//! communication domain of the all-to-all (paper §IV-A) and keeps the FL decision a pure
//! function of the mapping that the CL dispatch unit can table-look-up.

use super::routing::Routing;
use super::{MapError, Mapping};
use serde::Serialize;

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
}
