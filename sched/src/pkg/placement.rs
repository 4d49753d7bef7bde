//! FL expert placements of the baselines (SPEC §3 "Baselines"): which chiplet owns (loads
//! from its DDR channel and computes) each expert under EP and Hydra. FSE-DP has no static
//! placement: its trajectories come from the IO-die scheduler (`super::iodie`).

use super::iodie::IoDieError;

/// Expert parallelism: expert e on chiplet e mod N (round robin, not contiguous blocks): for
/// any E, also E not a multiple of N, chiplets differ by at most one expert, and a routing
/// whose popularity falls with the expert id does not put all hot experts on chiplet 0.
pub fn ep_placement_fl(experts: usize, chiplets: usize) -> Result<Vec<u8>, IoDieError> {
    if chiplets == 0 || chiplets > 256 {
        return Err(IoDieError::NoChiplets);
    }
    Ok((0..experts).map(|e| (e % chiplets) as u8).collect())
}

/// Hydra: popularity-driven placement of a layer's experts by their token counts — greedy
/// longest-processing-time packing. Experts in order of count descending (ties: lower expert
/// id first) each go to the chiplet with the smallest token load so far (ties: lower chiplet
/// id). Experts with no tokens are still placed (they cost nothing to the load).
pub fn hydra_placement_fl(tokens: &[u64], chiplets: usize) -> Result<Vec<u8>, IoDieError> {
    if chiplets == 0 || chiplets > 256 {
        return Err(IoDieError::NoChiplets);
    }
    let mut idx: Vec<usize> = (0..tokens.len()).collect();
    idx.sort_by(|&a, &b| tokens[b].cmp(&tokens[a]).then(a.cmp(&b)));
    let mut load = vec![0u64; chiplets];
    let mut out = vec![0u8; tokens.len()];
    for e in idx {
        // min_by_key returns the first minimum: the lowest chiplet id among ties.
        let c = (0..chiplets).min_by_key(|&c| load[c]).expect("chiplets > 0");
        load[c] = load[c].saturating_add(tokens[e]);
        out[e] = c as u8;
    }
    Ok(out)
}

/// Token load per chiplet of a placement.
pub fn placement_load_fl(tokens: &[u64], placement: &[u8], chiplets: usize) -> Vec<u64> {
    let mut load = vec![0u64; chiplets];
    for (&t, &c) in tokens.iter().zip(placement) {
        if (c as usize) < chiplets {
            load[c as usize] = load[c as usize].saturating_add(t);
        }
    }
    load
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep_round_robin() {
        assert_eq!(ep_placement_fl(6, 4).unwrap(), vec![0, 1, 2, 3, 0, 1]);
        assert!(ep_placement_fl(6, 0).is_err());
    }

    #[test]
    fn hydra_lpt() {
        // 9 (e0) → c0; 7 (e2) → c1; 5 (e1) → c1 (7 < 9) = 12; 3 (e3) → c0 (9) = 12;
        // 3 (e4) → c0 (12 = 12, lower id) = 15.
        let p = hydra_placement_fl(&[9, 5, 7, 3, 3], 2).unwrap();
        assert_eq!(p, vec![0, 1, 1, 0, 0]);
        assert_eq!(placement_load_fl(&[9, 5, 7, 3, 3], &p, 2), vec![15, 12]);
        assert!(hydra_placement_fl(&[1], 0).is_err());
    }
}
