//! All-reduce plans (FL): executing `allreduce_plan` with `execute_fl` on random data gives the
//! all-reduce / reduce-scatter / HER results, each die sends at most one chunk per ring
//! direction per step, and the step counts are 2(tp−1), tp−1 (no all-gather) and
//! (tp−1) + (wafers−1) (HER).

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sched::wafer::*;
use std::collections::HashMap;

type State = HashMap<(u32, ChunkId), Vec<i64>>;

/// Every die holds its partial of every chunk of its own group.
fn inputs(m: &Mapping, len: usize, seed: u64) -> State {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut st = HashMap::new();
    for d in 0..m.geom.dies() {
        for c in 0..2 * m.tp {
            let v = (0..len).map(|_| rng.gen_range(-1000..1000)).collect();
            st.insert((d, ChunkId { group: m.group_of[d as usize], chunk: c }), v);
        }
    }
    st
}

/// The all-reduce result of every (group, chunk).
fn sums(inp: &State, len: usize) -> HashMap<ChunkId, Vec<i64>> {
    let mut out: HashMap<ChunkId, Vec<i64>> = HashMap::new();
    for ((_, id), v) in inp {
        let s = out.entry(*id).or_insert_with(|| vec![0; len]);
        for (a, b) in s.iter_mut().zip(v) {
            *a += b;
        }
    }
    out
}

/// Per (step, src): at most two transfers, to the (next, prev) neighbours of the ring the phase
/// uses, one each.
fn check_directions(m: &Mapping, plan: &CollectivePlan) -> Result<(), TestCaseError> {
    let geom = m.geom;
    let intra_steps = if m.kind == MappingKind::Her || !m.all_gather { m.tp - 1 } else { 2 * (m.tp - 1) };
    let wring: Vec<u32> = ring_order(geom.wafers_x, geom.wafers_y).iter().map(|&(x, y)| y * geom.wafers_x + x).collect();
    let mut by: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
    for x in &plan.xfers {
        prop_assert!(x.step < plan.steps);
        prop_assert!(x.data.chunk < plan.chunks_per_group);
        by.entry((x.step, x.src)).or_default().push(x.dst);
    }
    for ((step, src), mut dsts) in by {
        let (next, prev) = if step < intra_steps {
            m.ring_neighbours(src)
        } else {
            let w = geom.wafers();
            let i = wring.iter().position(|&x| x == geom.wafer_of(src)).unwrap() as u32;
            let q = geom.local_of(src);
            (geom.global_of(wring[((i + 1) % w) as usize], q), geom.global_of(wring[((i + w - 1) % w) as usize], q))
        };
        dsts.sort_unstable();
        let mut want = vec![next, prev];
        want.sort_unstable();
        prop_assert_eq!(dsts, want, "step {} src {}", step, src);
    }
    Ok(())
}

fn check_plan(m: &Mapping, seed: u64) -> Result<(), TestCaseError> {
    let len = 3;
    let plan = allreduce_plan(m);
    let (tp, w) = (m.tp, m.geom.wafers());
    prop_assert_eq!(plan.chunks_per_group, 2 * tp);
    let want_steps = match (m.kind, m.all_gather) {
        (MappingKind::Her, true) => (tp - 1) + (w - 1),
        (_, false) => tp - 1,
        (_, true) => 2 * (tp - 1),
    };
    prop_assert_eq!(plan.steps, want_steps);
    if tp == 1 && m.kind != MappingKind::Her {
        prop_assert!(plan.xfers.is_empty());
    }
    prop_assert!(plan.xfers.windows(2).all(|p| (p[0].step, p[0].src) <= (p[1].step, p[1].src)));
    if let Some(last) = plan.xfers.last() {
        prop_assert_eq!(last.step + 1, plan.steps);
    }
    check_directions(m, &plan)?;

    let inp = inputs(m, len, seed);
    let want = sums(&inp, len);
    let out = execute_fl(&plan, &inp);
    let gpw = m.groups_per_wafer();
    for d in 0..m.geom.dies() {
        let (g, r) = (m.group_of[d as usize], m.rank_of[d as usize]);
        let owned = |g: u32| [ChunkId { group: g, chunk: r }, ChunkId { group: g, chunk: tp + r }];
        match (m.kind, m.all_gather) {
            (MappingKind::Her, true) => {
                // own group's rank-owned chunks and those of the same-position dies' groups on
                // every other wafer
                for wafer in 0..w {
                    for id in owned(wafer * gpw + g % gpw) {
                        prop_assert_eq!(out.get(&(d, id)), want.get(&id), "die {} {:?}", d, id);
                    }
                }
            }
            (_, true) => {
                for c in 0..2 * tp {
                    let id = ChunkId { group: g, chunk: c };
                    prop_assert_eq!(out.get(&(d, id)), want.get(&id), "die {} {:?}", d, id);
                }
            }
            (_, false) => {
                for id in owned(g) {
                    prop_assert_eq!(out.get(&(d, id)), want.get(&id), "die {} {:?}", d, id);
                }
            }
        }
    }
    Ok(())
}

#[test]
fn er_4x4_entwined_rings_example() {
    let m = map(MappingKind::Er, WaferGeom::single(4, 4), 4, 4, true).unwrap();
    let plan = allreduce_plan(&m);
    assert_eq!(plan.steps, 6);
    // 16 dies × 2 directions × 6 steps
    assert_eq!(plan.xfers.len(), 16 * 2 * 6);
    // every transfer is one entwined-ring step: 2 hops
    assert!(plan.xfers.iter().all(|x| m.geom.hops(x.src, x.dst) == 2));
    assert_eq!(plan.step_xfers(0).len(), 32);
    assert!(plan.step_xfers(0).iter().all(|x| x.reduce));
    assert!(plan.step_xfers(3).iter().all(|x| !x.reduce));
    check_plan(&m, 1).unwrap();
}

#[test]
fn her_2x2_wafers() {
    let geom = WaferGeom { wafers_x: 2, wafers_y: 2, die_cols: 4, die_rows: 4 };
    let m = map(MappingKind::Her, geom, 4, 16, true).unwrap();
    let plan = allreduce_plan(&m);
    assert_eq!(plan.steps, 3 + 3);
    // inter-wafer steps move between equal local positions of neighbouring wafers: 4 hops
    assert!(plan.xfers.iter().filter(|x| x.step >= 3).all(|x| geom.hops(x.src, x.dst) == 4));
    check_plan(&m, 2).unwrap();
}

#[test]
fn execute_fl_is_total() {
    // missing sources are skipped, reduce onto nothing stores, length mismatch pads
    let id = ChunkId { group: 0, chunk: 0 };
    let plan = CollectivePlan {
        chunks_per_group: 2,
        steps: 2,
        xfers: vec![
            Xfer { step: 0, src: 0, dst: 1, data: id, reduce: true },
            Xfer { step: 0, src: 5, dst: 1, data: id, reduce: true },
            Xfer { step: 1, src: 2, dst: 1, data: id, reduce: true },
        ],
    };
    let inp: State = [((0, id), vec![1, 2]), ((2, id), vec![10, 20, 30])].into_iter().collect();
    let out = execute_fl(&plan, &inp);
    assert_eq!(out[&(1, id)], vec![11, 22, 30]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn single_wafer_allreduce(c in 1u32..7, r in 1u32..7, pick in 0u32..64, er in any::<bool>(), ag in any::<bool>(), seed in any::<u64>()) {
        let divs: Vec<u32> = (1..=c * r).filter(|t| (c * r) % t == 0).collect();
        let tp = divs[pick as usize % divs.len()];
        let kind = if er { MappingKind::Er } else { MappingKind::Baseline };
        let m = map(kind, WaferGeom::single(c, r), tp, c * r / tp, ag).unwrap();
        check_plan(&m, seed)?;
    }

    #[test]
    fn her_allreduce(wx in 1u32..4, wy in 1u32..3, c in 1u32..5, r in 1u32..5, pick in 0u32..64, ag in any::<bool>(), seed in any::<u64>()) {
        prop_assume!(wx * wy > 1);
        let geom = WaferGeom { wafers_x: wx, wafers_y: wy, die_cols: c, die_rows: r };
        let divs: Vec<u32> = (1..=c * r).filter(|t| (c * r) % t == 0).collect();
        let tp = divs[pick as usize % divs.len()];
        let m = map(MappingKind::Her, geom, tp, geom.dies() / tp, ag).unwrap();
        check_plan(&m, seed)?;
    }
}
