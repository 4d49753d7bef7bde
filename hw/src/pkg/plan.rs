//! What one MoE layer asks of the package: where each token lives, which experts each
//! chiplet must serve, and what moves over D2D before and after the experts run. Built from
//! the gating result (each token's top-k experts) at layer start — the information the
//! gating units hand to the IO die's EIT and to the chiplets.
//!
//! Token homes: the iteration's tokens are split into N equal contiguous blocks, block c on
//! chiplet c (attention is data-parallel over chiplets, and a block keeps a request's
//! consecutive positions together).

use super::config::Strategy;

/// Per-layer work of the whole package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPlan {
    pub chiplets: usize,
    pub experts: usize,
    /// Home chiplet of each token.
    pub home: Vec<u8>,
    /// `count[e][c]`: tokens of expert e computed on chiplet c (after dispatch for EP/Hydra).
    pub count: Vec<Vec<u32>>,
    /// EP/Hydra: chiplet that owns each expert (its weights are loaded and computed there).
    pub owner: Option<Vec<u8>>,
    /// EP/Hydra: (token, expert, from, to) activations dispatched before the expert runs;
    /// the outputs go back the opposite way (combine).
    pub dispatch: Vec<(u32, u16, u8, u8)>,
}

impl LayerPlan {
    /// `routing[t]` = the experts of token t (distinct, < `experts`). `owner` is the EP or
    /// Hydra placement (ignored for FSE-DP strategies).
    pub fn build(routing: &[Vec<u16>], experts: usize, chiplets: usize, strategy: Strategy, owner: Option<Vec<u8>>) -> LayerPlan {
        let home = Self::homes(routing.len(), chiplets);
        let mut count = vec![vec![0u32; chiplets]; experts];
        let mut dispatch = Vec::new();
        let owner = if strategy.streams_experts() { None } else { owner };
        for (t, es) in routing.iter().enumerate() {
            for &e in es {
                let h = home[t];
                let at = owner.as_ref().map_or(h, |o| o[e as usize]);
                count[e as usize][at as usize] += 1;
                if at != h {
                    dispatch.push((t as u32, e, h, at));
                }
            }
        }
        LayerPlan { chiplets, experts, home, count, owner, dispatch }
    }

    /// Home chiplet of each of `t_n` tokens: N equal contiguous blocks.
    pub fn homes(t_n: usize, chiplets: usize) -> Vec<u8> {
        (0..t_n).map(|t| (t * chiplets / t_n.max(1)) as u8).collect()
    }

    /// Trajectory mask of expert e: chiplets that compute it.
    pub fn mask(&self, e: usize) -> u16 {
        self.count[e].iter().enumerate().filter(|(_, &n)| n > 0).fold(0, |m, (c, _)| m | 1 << c)
    }

    /// Tokens routed to expert e in total.
    pub fn tokens(&self, e: usize) -> u32 {
        self.count[e].iter().sum()
    }

    /// Per expert, per chiplet token counts: the EIT's input.
    pub fn counts(&self) -> &[Vec<u32>] {
        &self.count
    }

    /// Token ids homed on chiplet c that are routed to expert e, in token order (the PE
    /// job's rows; for EP/Hydra on the owner, every token of e).
    pub fn tokens_of(&self, routing: &[Vec<u16>], e: u16, c: u8) -> Vec<u32> {
        routing
            .iter()
            .enumerate()
            .filter(|(t, es)| es.contains(&e) && self.owner.as_ref().map_or(self.home[*t], |o| o[e as usize]) == c)
            .map(|(t, _)| t as u32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fse_dp_keeps_tokens_home_ep_dispatches() {
        // 4 tokens on 2 chiplets (0,1 on c0; 2,3 on c1), top-1.
        let routing = vec![vec![0], vec![1], vec![0], vec![0]];
        let p = LayerPlan::build(&routing, 2, 2, Strategy::A3, None);
        assert_eq!(p.home, vec![0, 0, 1, 1]);
        assert_eq!(p.count, vec![vec![1, 2], vec![1, 0]]);
        assert_eq!(p.mask(0), 0b11);
        assert_eq!(p.mask(1), 0b01);
        assert!(p.dispatch.is_empty());
        // EP: expert 0 on c1, expert 1 on c0: token 0 goes 0 -> 1.
        let q = LayerPlan::build(&routing, 2, 2, Strategy::Ep, Some(vec![1, 0]));
        assert_eq!(q.count, vec![vec![0, 3], vec![1, 0]]);
        assert_eq!(q.dispatch, vec![(0, 0, 0, 1)]);
        assert_eq!(q.tokens_of(&routing, 0, 1), vec![0, 2, 3]);
    }
}
