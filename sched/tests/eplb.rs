//! DeepSeek's EPLB (FL): the EPLB README's example reproduced exactly, hand-checked small cases
//! of each step and policy (ties broken lower index first), refused inputs naming their
//! argument, and structural invariants over random sizes and loads.

use proptest::prelude::*;
use sched::balance::eplb::MAX_REPLICAS;
use sched::balance::*;

fn cfg(num_replicas: usize, num_groups: usize, num_nodes: usize, num_gpus: usize) -> EplbCfg {
    EplbCfg { num_replicas, num_groups, num_nodes, num_gpus }
}

fn rows(w: &[&[f64]]) -> Vec<Vec<f64>> {
    w.iter().map(|r| r.to_vec()).collect()
}

/// The example of the EPLB repository's README: two layers of 12 experts, 16 replicas, 4 groups,
/// 2 nodes of 4 GPUs; its printed `phy2log`.
#[test]
fn readme_example() {
    let w = rows(&[
        &[90., 132., 40., 61., 104., 165., 39., 4., 73., 56., 183., 86.],
        &[20., 107., 104., 64., 19., 197., 187., 157., 172., 86., 16., 27.],
    ]);
    let plan = rebalance_experts(&w, &cfg(16, 4, 2, 8)).unwrap();
    assert_eq!(plan.policy, Policy::Hierarchical);
    assert_eq!(
        plan.phy2log,
        vec![vec![5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1], vec![7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]
    );
    assert_eq!(plan.logcnt, vec![vec![1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1], vec![1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]]);
    // log2phy: each expert's slots in replica-rank order, -1 padded to the largest count (2).
    assert_eq!(plan.log2phy[0][5], vec![0, 2]);
    assert_eq!(plan.log2phy[0][0], vec![12, -1]);
    assert_eq!(plan.log2phy[1][8], vec![6, 3], "rank 0 (the original) packed to GPU 3, rank 1 to GPU 1");
    assert!(plan.log2phy.iter().flatten().all(|r| r.len() == 2));
    // In id order (experts 0,1 | 2 | 3,4 | 5 | ...) layer 0's worst device carries 239 tokens
    // of a 129.125 mean; after EPLB 156 (experts 0 and half of 1 on GPU 6).
    let before: Vec<f64> = (0..2).map(|l| max_over_mean(&in_order_device_loads(&w[l], 8))).collect();
    let after: Vec<f64> = (0..2).map(|l| max_over_mean(&plan.device_loads(l, &w[l]))).collect();
    assert!(after[0] < before[0] && after[1] < before[1], "{before:?} {after:?}");
    assert!((before[0] - 239.0 / 129.125).abs() < 1e-12 && (after[0] - 156.0 / 129.125).abs() < 1e-12, "{before:?} {after:?}");
    let l0 = plan.device_loads(0, &w[0]);
    assert_eq!(l0, vec![121.5, 86.5, 125.0, 113.0, 147.5, 131.5, 156.0, 152.0]);
}

#[test]
fn balanced_packing_by_hand() {
    // heaviest first to the lightest pack with room: 3 -> p0, 2 -> p1, 2 -> p1 (full), 1 -> p0
    let p = balanced_packing(&[3.0, 1.0, 2.0, 2.0], 2).unwrap();
    assert_eq!(p.pack_index, vec![0, 0, 1, 1]);
    assert_eq!(p.rank_in_pack, vec![0, 1, 0, 1]);
    // all equal: items in index order, equally light packs lowest first
    let p = balanced_packing(&[1.0; 4], 2).unwrap();
    assert_eq!(p.pack_index, vec![0, 1, 0, 1]);
    assert_eq!(p.rank_in_pack, vec![0, 0, 1, 1]);
    // one item per pack: the identity, whatever the weights
    let p = balanced_packing(&[1.0, 9.0, 5.0], 3).unwrap();
    assert_eq!(p.pack_index, vec![0, 1, 2]);
    assert_eq!(p.rank_in_pack, vec![0, 0, 0]);
    // -0 and +0 are equal loads: index order
    let p = balanced_packing(&[0.0, -0.0, 0.0, -0.0], 1).unwrap();
    assert_eq!(p.rank_in_pack, vec![0, 1, 2, 3]);
    assert!(balanced_packing(&[1.0; 3], 2).is_none());
    assert!(balanced_packing(&[1.0; 2], 0).is_none());
    assert!(balanced_packing(&[1.0, f64::NAN], 1).is_none());
}

#[test]
fn replicate_experts_by_hand() {
    // 6,2,3 -> +0 (3 per replica) -> +0 (tie 3 = 3: lower id) -> +2 (3 > 2) -> done
    let r = replicate_experts(&[6.0, 2.0, 3.0], 6).unwrap();
    assert_eq!(r.phy2log, vec![0, 1, 2, 0, 0, 2]);
    assert_eq!(r.rank, vec![0, 0, 0, 1, 2, 1]);
    assert_eq!(r.logcnt, vec![3, 1, 2]);
    let r = replicate_experts(&[0.0, 0.0], 4).unwrap();
    assert_eq!(r.phy2log, vec![0, 1, 0, 0], "all zero: argmax is the first index");
    assert!(replicate_experts(&[1.0; 3], 2).is_none());
}

#[test]
fn global_policy_by_hand() {
    // groups % nodes != 0 -> global. Replicate 6,2,3,1 to 6 slots: expert 0 x3 (2 each).
    // Per-replica loads [2,2,3,1,2,2]; pack 3 per GPU: 3->g0, 2->g1, 2->g1, 2->g0, 2->g1, 1->g0.
    let w = rows(&[&[6.0, 2.0, 3.0, 1.0]]);
    let plan = rebalance_experts(&w, &cfg(6, 1, 2, 2)).unwrap();
    assert_eq!(plan.policy, Policy::Global);
    assert_eq!(plan.phy2log, vec![vec![2, 0, 3, 0, 1, 0]]);
    assert_eq!(plan.phyrank, vec![vec![0, 1, 0, 0, 0, 2]]);
    assert_eq!(plan.logcnt, vec![vec![3, 1, 1, 1]]);
    assert_eq!(plan.log2phy, vec![vec![vec![3, 1, 5], vec![4, -1, -1], vec![0, -1, -1], vec![2, -1, -1]]]);
    assert_eq!(plan.device_loads(0, &w[0]), vec![6.0, 6.0]);
    // the global policy is the hierarchical one with one group on one node
    let one = rebalance_experts(&w, &cfg(6, 1, 1, 2)).unwrap();
    assert_eq!(one.policy, Policy::Hierarchical);
    assert_eq!((one.phy2log, one.phyrank, one.logcnt), (plan.phy2log, plan.phyrank, plan.logcnt));
}

#[test]
fn hierarchical_by_hand() {
    // Group loads [3,10,6,5] onto 2 nodes: g1 -> n0, g2 -> n1, g3 -> n1, g0 -> n0.
    // Node 0 holds experts 2,3,0,1 (loads 10,0,1,2): 10 -> gpu0, 2 -> gpu1, 1 -> gpu1, 0 -> gpu0.
    // Node 1 holds experts 4..8 (loads 3,3,4,1): 4 -> gpu2, 3 -> gpu3, 3 -> gpu3 (tie: expert 4
    // before 5), 1 -> gpu2.
    let w = rows(&[&[1.0, 2.0, 10.0, 0.0, 3.0, 3.0, 4.0, 1.0]]);
    let plan = rebalance_experts(&w, &cfg(8, 4, 2, 4)).unwrap();
    assert_eq!(plan.phy2log, vec![vec![2, 3, 1, 0, 6, 7, 4, 5]]);
    assert_eq!(plan.logcnt, vec![vec![1; 8]]);
    assert_eq!(plan.device_loads(0, &w[0]), vec![10.0, 3.0, 5.0, 6.0]);

    // Replication within nodes: one group per node, 3 slots each, one GPU per node; a GPU's
    // slots in packing order (heaviest replica first).
    let w = rows(&[&[1.0, 1.0, 5.0, 3.0]]);
    let plan = rebalance_experts(&w, &cfg(6, 2, 2, 2)).unwrap();
    assert_eq!(plan.phy2log, vec![vec![1, 0, 0, 3, 2, 2]]);
    assert_eq!(plan.phyrank, vec![vec![0, 0, 1, 0, 0, 1]]);
    assert_eq!(plan.logcnt, vec![vec![2, 1, 2, 1]]);
}

#[test]
fn bad_inputs_name_their_argument() {
    let w = rows(&[&[1.0; 12], &[2.0; 12]]);
    let arg = |w: &[Vec<f64>], c: EplbCfg| rebalance_experts(w, &c).unwrap_err().arg;
    assert_eq!(arg(&w, cfg(18, 4, 2, 8)), EplbArg::NumReplicas, "18 % 8");
    assert_eq!(arg(&w, cfg(16, 4, 3, 8)), EplbArg::NumGpus, "8 % 3 nodes");
    assert_eq!(arg(&w, cfg(16, 5, 1, 8)), EplbArg::NumGroups, "12 % 5 groups");
    assert_eq!(arg(&w, cfg(8, 4, 2, 8)), EplbArg::NumReplicas, "8 < 12 experts");
    for (c, a) in [(cfg(0, 4, 2, 8), EplbArg::NumReplicas), (cfg(16, 0, 2, 8), EplbArg::NumGroups), (cfg(16, 4, 0, 8), EplbArg::NumNodes), (cfg(16, 4, 2, 0), EplbArg::NumGpus)] {
        assert_eq!(arg(&w, c), a, "{c:?}");
    }
    assert_eq!(arg(&w, cfg(MAX_REPLICAS + 8, 4, 2, 8)), EplbArg::NumReplicas);
    let ok = cfg(16, 4, 2, 8);
    for bad in [vec![], vec![vec![]], rows(&[&[1.0; 12], &[1.0; 11]]), rows(&[&[1.0, -1.0, 1.0, 1.0]]), rows(&[&[1.0, f64::NAN, 1.0, 1.0]]), rows(&[&[f64::INFINITY; 4]])] {
        let e = rebalance_experts(&bad, &ok).unwrap_err();
        assert_eq!(e.arg, EplbArg::Weight, "{bad:?}: {e}");
    }
    let e = rebalance_experts(&rows(&[&[1.0; 12], &[1.0; 11]]), &ok).unwrap_err();
    assert_eq!(e.to_string(), "weight: layer 1 has 11 experts, layer 0 has 12");
    let e = rebalance_experts(&w, &cfg(16, 4, 2, 9)).unwrap_err();
    assert_eq!(e.to_string(), "num_gpus: 9 GPUs do not split evenly over 2 nodes");
}

#[test]
fn baseline_loads() {
    // 12 experts on 8 devices in id order: runs of 2,1,2,1,... ; 4 experts on 8 devices: every other.
    let row: Vec<f64> = (0..12).map(|e| e as f64).collect();
    assert_eq!(in_order_device_loads(&row, 8), vec![1.0, 2.0, 7.0, 5.0, 13.0, 8.0, 19.0, 11.0]);
    assert_eq!(in_order_device_loads(&[1.0; 4], 8), vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    assert_eq!(max_over_mean(&[1.0, 0.0, 1.0, 0.0]), 2.0);
    assert_eq!(max_over_mean(&[0.0, 0.0]), 1.0);
}

/// Sizes of either policy: `nodes` nodes of `gpus_per_node` GPUs, `groups` groups of
/// `group_size` experts, enough slots per GPU for every expert plus `extra`.
fn sizes() -> impl Strategy<Value = (EplbCfg, usize)> {
    (1usize..=4, 1usize..=4, 1usize..=8, 1usize..=4, 0usize..=3).prop_map(|(nodes, gpus_per_node, groups, group_size, extra)| {
        let gpus = nodes * gpus_per_node;
        let experts = groups * group_size;
        let spg = experts.div_ceil(gpus) + extra;
        (cfg(gpus * spg, groups, nodes, gpus), experts)
    })
}

/// Loads with many ties (small integers, zeros) or spread floats.
fn loads(layers: usize, experts: usize) -> impl Strategy<Value = Vec<Vec<f64>>> {
    let x = prop_oneof![(0u32..4).prop_map(f64::from), 0.0f64..1e4];
    proptest::collection::vec(proptest::collection::vec(x, experts), layers)
}

fn case() -> impl Strategy<Value = (EplbCfg, Vec<Vec<f64>>)> {
    (sizes(), 1usize..=3).prop_flat_map(|((c, experts), layers)| (Just(c), loads(layers, experts)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plan_invariants((c, w) in case()) {
        let plan = rebalance_experts(&w, &c).unwrap();
        let experts = w[0].len();
        let maxcnt = plan.logcnt.iter().flatten().copied().max().unwrap();
        prop_assert_eq!(plan.policy, if c.num_groups % c.num_nodes == 0 { Policy::Hierarchical } else { Policy::Global });
        for l in 0..w.len() {
            let (p2l, rank, cnt) = (&plan.phy2log[l], &plan.phyrank[l], &plan.logcnt[l]);
            prop_assert_eq!(p2l.len(), c.num_replicas);
            prop_assert_eq!(cnt.iter().sum::<usize>(), c.num_replicas);
            prop_assert!(cnt.iter().all(|&n| n >= 1), "every expert has a replica: {:?}", cnt);
            // each GPU gets num_replicas / num_gpus slots
            let mut per_gpu = vec![0usize; c.num_gpus];
            for p in 0..c.num_replicas { per_gpu[c.gpu_of_slot(p)] += 1; }
            prop_assert!(per_gpu.iter().all(|&n| n == c.num_replicas / c.num_gpus));
            // phy2log / phyrank / logcnt / log2phy agree
            let m = &plan.log2phy[l];
            prop_assert_eq!(m.len(), experts);
            for e in 0..experts {
                prop_assert_eq!(m[e].len(), maxcnt);
                for r in 0..maxcnt {
                    if r < cnt[e] {
                        let p = m[e][r] as usize;
                        prop_assert!(m[e][r] >= 0 && p2l[p] == e && rank[p] == r, "layer {} expert {} rank {}", l, e, r);
                    } else {
                        prop_assert_eq!(m[e][r], -1);
                    }
                }
                prop_assert_eq!(p2l.iter().filter(|&&x| x == e).count(), cnt[e]);
            }
            // no replica carries more than the heaviest expert alone; the total is kept
            let dev = plan.device_loads(l, &w[l]);
            let total: f64 = w[l].iter().sum();
            prop_assert!((dev.iter().sum::<f64>() - total).abs() <= 1e-9 * total.max(1.0));
            if plan.policy == Policy::Hierarchical {
                // every group's replicas on one node, groups_per_node groups per node
                let gs = experts / c.num_groups;
                let mut groups_on = vec![std::collections::BTreeSet::new(); c.num_nodes];
                for g in 0..c.num_groups {
                    let nodes: std::collections::BTreeSet<usize> = (0..c.num_replicas).filter(|&p| p2l[p] / gs == g).map(|p| c.node_of_slot(p)).collect();
                    prop_assert_eq!(nodes.len(), 1, "group {} on nodes {:?}", g, nodes);
                    groups_on[*nodes.iter().next().unwrap()].insert(g);
                }
                prop_assert!(groups_on.iter().all(|s| s.len() == c.num_groups / c.num_nodes), "{:?}", groups_on);
            }
        }
    }

    /// Scaling every load by a power of two is exact, so the placement cannot change; the
    /// global policy is the hierarchical one with one group on one node.
    #[test]
    fn scale_invariant_and_global_is_one_node((c, w) in case()) {
        let plan = rebalance_experts(&w, &c).unwrap();
        let w4: Vec<Vec<f64>> = w.iter().map(|r| r.iter().map(|x| x * 4.0).collect()).collect();
        let plan4 = rebalance_experts(&w4, &c).unwrap();
        prop_assert_eq!(&plan.phy2log, &plan4.phy2log);
        prop_assert_eq!(&plan.phyrank, &plan4.phyrank);
        if plan.policy == Policy::Global {
            let one = rebalance_experts(&w, &cfg(c.num_replicas, 1, 1, c.num_gpus)).unwrap();
            prop_assert_eq!(&plan.phy2log, &one.phy2log);
            prop_assert_eq!(&plan.log2phy, &one.log2phy);
        }
    }

    /// Any sizes and loads: a plan or an error naming an argument, never a panic.
    #[test]
    fn never_panics(r in 0usize..40, g in 0usize..6, n in 0usize..5, d in 0usize..9,
                    w in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(f64::NAN), Just(-1.0), Just(f64::INFINITY), 0.0f64..10.0], 0..9), 0..3)) {
        match rebalance_experts(&w, &cfg(r, g, n, d)) {
            Ok(p) => prop_assert_eq!(p.phy2log.len(), w.len()),
            Err(e) => prop_assert!(!e.reason.is_empty()),
        }
    }
}
