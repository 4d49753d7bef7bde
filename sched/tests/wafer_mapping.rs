//! Wafer mapping controller (FL): the paper's 4×4 worked example (Fig. 8), HER on 2×2 wafers,
//! and structural invariants over every single-wafer mesh up to 8×8 and every TP.

use proptest::prelude::*;
use sched::wafer::*;
use std::collections::HashSet;

fn g44() -> WaferGeom {
    WaferGeom::single(4, 4)
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

#[test]
fn er_4x4_ftds_are_the_quadrants() {
    let m = map(MappingKind::Er, g44(), 4, 4, true).unwrap();
    let mut ftds: Vec<Vec<u32>> = m.ftds.iter().cloned().map(sorted).collect();
    ftds.sort();
    assert_eq!(ftds, vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7], vec![8, 9, 12, 13], vec![10, 11, 14, 15]]);
    assert!(m.ftds_disjoint());
    // entwined two-hop rings (Fig. 8(d)): every ring step is 2 hops
    for ring in &m.groups {
        for r in 0..4 {
            assert_eq!(m.geom.hops(ring[r], ring[(r + 1) % 4]), 2, "{ring:?}");
        }
    }
}

#[test]
fn baseline_4x4_ftds_intersect_in_the_centre() {
    let m = map(MappingKind::Baseline, g44(), 4, 4, true).unwrap();
    assert!(!m.ftds_disjoint());
    let centre = [5u32, 6, 9, 10];
    for i in 0..4 {
        let a = m.ftd_area(i);
        assert_eq!(a.len(), 9, "FTD {i} spans a 3x3 area");
        assert!(centre.iter().all(|c| a.contains(c)), "FTD {i} area {a:?}");
        for j in 0..i {
            assert!(a.iter().any(|d| m.ftd_area(j).contains(d)), "FTDs {i} and {j}");
        }
    }
    // the paper's example FTD {D11^1, D13^2, D31^3, D33^4} (1-based) = dies 0, 2, 8, 10
    assert!(m.ftds.iter().any(|f| sorted(f.clone()) == vec![0, 2, 8, 10]));
    // TP groups are the quadrants, one-hop rings
    for ring in &m.groups {
        for r in 0..4 {
            assert_eq!(m.geom.hops(ring[r], ring[(r + 1) % 4]), 1);
        }
    }
}

#[test]
fn worked_example_hops_8_3_vs_4_3() {
    let b = map(MappingKind::Baseline, g44(), 4, 4, true).unwrap();
    let e = map(MappingKind::Er, g44(), 4, 4, true).unwrap();
    assert!((b.avg_a2a_hops() - 8.0 / 3.0).abs() < 1e-9, "{}", b.avg_a2a_hops());
    assert!((e.avg_a2a_hops() - 4.0 / 3.0).abs() < 1e-9, "{}", e.avg_a2a_hops());
}

#[test]
fn all_gather_shortens_fetches() {
    // Fig. 9: without all-gather only the rank-owner holds a slice, so fetches are longer.
    for kind in [MappingKind::Baseline, MappingKind::Er] {
        let on = map(kind, g44(), 4, 4, true).unwrap().avg_a2a_hops();
        let off = map(kind, g44(), 4, 4, false).unwrap().avg_a2a_hops();
        assert!(off > on, "{kind}: off {off} on {on}");
    }
}

#[test]
fn her_2x2_wafers_of_8x8() {
    let geom = WaferGeom { wafers_x: 2, wafers_y: 2, die_cols: 8, die_rows: 8 };
    let m = map(MappingKind::Her, geom, 16, 16, true).unwrap();
    assert_eq!(m.ftds.len(), 4);
    for (w, f) in m.ftds.iter().enumerate() {
        assert_eq!(f.len(), 64);
        assert!(f.iter().all(|&d| geom.wafer_of(d) == w as u32));
    }
    assert!(m.ftds_disjoint());
    // TP groups are wafer-local, 4 per wafer, global index = wafer*4 + local
    for (g, ring) in m.groups.iter().enumerate() {
        assert_eq!(ring.len(), 16);
        assert!(ring.iter().all(|&d| geom.wafer_of(d) == g as u32 / 4), "group {g}");
    }
    // every holder is on the host's wafer
    for h in (0..256).step_by(7) {
        for g in 0..16 {
            for s in 0..16 {
                assert_eq!(geom.wafer_of(m.holder(h, g, s)), geom.wafer_of(h));
            }
        }
    }
    // Hop metric: HER's FTD is a whole wafer, so it fetches farther than flat ER (4x4 FTDs)
    // but far less than the baseline; HER wins on the all-reduce instead (no multi-hop
    // cross-wafer entwined rings; docs/wafer-mapping.md).
    let er = map(MappingKind::Er, geom, 16, 16, true).unwrap().avg_a2a_hops();
    let base = map(MappingKind::Baseline, geom, 16, 16, true).unwrap().avg_a2a_hops();
    let her = m.avg_a2a_hops();
    assert!(er < her && her < base, "er {er} her {her} baseline {base}");
    assert!((er - 8.0 / 3.0).abs() < 1e-9, "{er}");
}

#[test]
fn map_errors_name_the_field() {
    let e = map(MappingKind::Er, g44(), 4, 3, true).unwrap_err();
    assert_eq!(e.field, "dp");
    assert!(e.reason.contains("4*3") && e.reason.contains("16"), "{e}");
    let e = map(MappingKind::Er, g44(), 3, 5, true).unwrap_err();
    assert_eq!(e.field, "tp");
    assert_eq!(map(MappingKind::Er, g44(), 0, 16, true).unwrap_err().field, "tp");
    assert_eq!(map(MappingKind::Er, g44(), 16, 0, true).unwrap_err().field, "dp");
    let e = map(MappingKind::Her, g44(), 4, 4, true).unwrap_err();
    assert_eq!(e.field, "mapping");
    let geom = WaferGeom { wafers_x: 2, wafers_y: 1, die_cols: 2, die_rows: 3 };
    let e = map(MappingKind::Her, geom, 4, 3, true).unwrap_err();
    assert_eq!(e.field, "tp", "{e}");
    let e = map(MappingKind::Er, WaferGeom::single(0, 4), 1, 0, true).unwrap_err();
    assert_eq!(e.field, "wafer.die_cols");
    assert_eq!("HER".parse::<MappingKind>().unwrap(), MappingKind::Her);
    let e = "torus".parse::<MappingKind>().unwrap_err();
    assert!(e.field == "mapping" && e.reason.contains("baseline, er, her"));
}

#[test]
fn placement_and_dispatch() {
    let m = map(MappingKind::Er, g44(), 4, 4, true).unwrap();
    let hosts = expert_hosts(16, 16);
    // group 0, token 0 → experts 3 and 12; token 1 → expert 0 (on die 0 of group 0)
    let routing = Routing::from_raw(vec![vec![vec![3u16, 12], vec![0]], vec![], vec![], vec![]]);
    let p = dispatch_plan(&m, &hosts, &routing);
    assert_eq!(p.len(), 3);
    // expert 3 on die 3: FTD {2,3,6,7}, group 0's die there is 2
    assert_eq!(p[0], A2aXfer { group: 0, token: 0, expert: 3, src: 2, dst: 3 });
    assert_eq!(p[1], A2aXfer { group: 0, token: 0, expert: 12, src: 8, dst: 12 });
    assert_eq!(p[2], A2aXfer { group: 0, token: 1, expert: 0, src: 0, dst: 0 });
    // replicas: 4 experts on 16 dies → expert e on dies e, e+4, e+8, e+12; the nearest wins
    let hosts = expert_hosts(4, 16);
    let p = dispatch_plan(&m, &hosts, &Routing::from_raw(vec![vec![vec![1u16]]]));
    assert_eq!(p[0].hops(&m), 1, "{:?}", p[0]);
    assert!(try_dispatch_plan(&m, &hosts, &Routing::from_raw(vec![vec![vec![9u16]]])).unwrap_err().field == "routing");
}

fn all_cases() -> Vec<(u32, u32, u32)> {
    let mut v = Vec::new();
    for c in 1..=8u32 {
        for r in 1..=8u32 {
            for tp in 1..=c * r {
                if (c * r) % tp == 0 {
                    v.push((c, r, tp));
                }
            }
        }
    }
    v
}

fn check_mapping(m: &Mapping) -> Result<(), TestCaseError> {
    let dies = m.geom.dies();
    let (tp, dp) = (m.tp, m.dp);
    // groups partition the dies, tp dies each, rings are permutations of the group
    prop_assert_eq!(m.groups.len() as u32, dp);
    let mut seen = HashSet::new();
    for (g, ring) in m.groups.iter().enumerate() {
        prop_assert_eq!(ring.len() as u32, tp);
        for (r, &d) in ring.iter().enumerate() {
            prop_assert!(d < dies && seen.insert(d), "die {} twice", d);
            prop_assert_eq!(m.group_of[d as usize], g as u32);
            prop_assert_eq!(m.rank_of[d as usize], r as u32);
        }
    }
    prop_assert_eq!(seen.len() as u32, dies);
    // FTDs partition the dies, and every FTD has exactly one die of every TP group
    prop_assert_eq!(m.ftds.len() as u32, tp);
    let mut seen = HashSet::new();
    for (i, f) in m.ftds.iter().enumerate() {
        let groups: Vec<u32> = f.iter().map(|&d| m.group_of[d as usize]).collect();
        prop_assert_eq!(sorted(groups.clone()), (0..dp).collect::<Vec<_>>(), "FTD {}", i);
        prop_assert_eq!(groups, (0..dp).collect::<Vec<_>>(), "ftds[i][g] is group g's die");
        for &d in f {
            prop_assert!(seen.insert(d));
            prop_assert_eq!(m.ftd_of[d as usize], i as u32);
        }
    }
    prop_assert_eq!(seen.len() as u32, dies);
    // the holder with all-gather is in the host's FTD and in the requested group
    for h in (0..dies).filter(|_| m.all_gather) {
        for g in 0..dp {
            let x = m.holder(h, g, 0);
            prop_assert_eq!(m.group_of[x as usize], g);
            prop_assert_eq!(m.ftd_of[x as usize], m.ftd_of[h as usize]);
        }
    }
    Ok(())
}

#[test]
fn every_single_wafer_case_is_well_formed() {
    // exhaustive over meshes 1..=8 × 1..=8 and every tp dividing the dies (the proptest below
    // samples the same space with random all-gather settings)
    for (c, r, tp) in all_cases() {
        for kind in [MappingKind::Baseline, MappingKind::Er] {
            let m = map(kind, WaferGeom::single(c, r), tp, c * r / tp, true)
                .unwrap_or_else(|e| panic!("{kind} {c}x{r} tp {tp}: {e}"));
            check_mapping(&m).unwrap_or_else(|e| panic!("{kind} {c}x{r} tp {tp}: {e}"));
            if kind == MappingKind::Er {
                assert!(m.ftds_disjoint(), "ER {c}x{r} tp {tp}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mapping_invariants(case in 0usize..1000, er in any::<bool>(), ag in any::<bool>()) {
        let cases = all_cases();
        let (c, r, tp) = cases[case % cases.len()];
        let kind = if er { MappingKind::Er } else { MappingKind::Baseline };
        let m = map(kind, WaferGeom::single(c, r), tp, c * r / tp, ag).unwrap();
        check_mapping(&m)?;
        if er { prop_assert!(m.ftds_disjoint()); }
        // The die-set check equals a hand-written rectangle-overlap test over every pair of
        // FTD bounding boxes (an independent reference: coordinates, not bits).
        let boxes: Vec<(u32, u32, u32, u32)> = m.ftds.iter().map(|f| {
            let xs: Vec<u32> = f.iter().map(|&d| d % c).collect();
            let ys: Vec<u32> = f.iter().map(|&d| d / c).collect();
            (*xs.iter().min().unwrap(), *ys.iter().min().unwrap(), *xs.iter().max().unwrap(), *ys.iter().max().unwrap())
        }).collect();
        let overlap = (0..boxes.len()).any(|i| (i + 1..boxes.len()).any(|j| {
            let (a, b) = (boxes[i], boxes[j]);
            a.0 <= b.2 && b.0 <= a.2 && a.1 <= b.3 && b.1 <= a.3
        }));
        prop_assert_eq!(m.ftds_disjoint(), !overlap);
        // without all-gather the holder is the rank owner
        if !ag {
            for g in 0..m.dp { for s in 0..tp { prop_assert_eq!(m.holder(0, g, s), m.groups[g as usize][s as usize]); } }
        }
        let h = m.avg_a2a_hops();
        prop_assert!(h.is_finite() && h >= 0.0);
    }

    #[test]
    fn map_never_panics(c in 0u32..10, r in 0u32..10, wx in 0u32..3, wy in 0u32..3, tp in 0u32..80, dp in 0u32..80, k in 0usize..3) {
        let geom = WaferGeom { wafers_x: wx, wafers_y: wy, die_cols: c, die_rows: r };
        if let Ok(m) = map(MappingKind::ALL[k], geom, tp, dp, true) {
            prop_assert_eq!(m.tp * m.dp, geom.dies());
            let _ = m.avg_a2a_hops();
        }
    }

    #[test]
    fn her_invariants(wx in 1u32..3, wy in 1u32..3, c in 1u32..5, r in 1u32..5, pick in 0u32..64, ag in any::<bool>()) {
        prop_assume!(wx * wy > 1);
        let geom = WaferGeom { wafers_x: wx, wafers_y: wy, die_cols: c, die_rows: r };
        let divs: Vec<u32> = (1..=c * r).filter(|t| (c * r) % t == 0).collect();
        let tp = divs[pick as usize % divs.len()];
        let m = map(MappingKind::Her, geom, tp, geom.dies() / tp, ag).unwrap();
        prop_assert_eq!(m.ftds.len() as u32, geom.wafers());
        let gpw = m.groups_per_wafer();
        for (g, ring) in m.groups.iter().enumerate() {
            prop_assert_eq!(ring.len() as u32, tp);
            prop_assert!(ring.iter().all(|&d| geom.wafer_of(d) == g as u32 / gpw));
        }
        if ag {
            for h in 0..geom.dies() {
                for g in 0..m.dp {
                    for s in 0..tp {
                        let x = m.holder(h, g, s);
                        prop_assert_eq!(geom.wafer_of(x), geom.wafer_of(h));
                        // same local position as the rank-s die of g on its own wafer
                        prop_assert_eq!(geom.local_of(x), geom.local_of(m.groups[g as usize][s as usize]));
                    }
                }
            }
        }
    }
}

#[test]
fn geom_config_is_strict_and_mapping_serializes() {
    let g: WaferGeom = serde_json::from_str(r#"{"wafers_x":2,"wafers_y":2,"die_cols":8,"die_rows":8}"#).unwrap();
    assert_eq!(g.dies(), 256);
    let e = serde_json::from_str::<WaferGeom>(r#"{"wafers_x":2,"wafers_y":2,"die_cols":8,"die_rows":8,"dies":1}"#);
    assert!(e.unwrap_err().to_string().contains("dies"));
    let m = map(MappingKind::Er, g44(), 4, 4, true).unwrap();
    let j = serde_json::to_value(&m).unwrap();
    assert_eq!(j["kind"], "er");
    assert_eq!(j["groups"][0], serde_json::json!([0, 2, 10, 8]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every (token, expert) pair gets one record; its source is the holder of the chosen
    /// replica and no other replica is closer (ties → lower host id).
    #[test]
    fn dispatch_picks_nearest_replica(case in 0usize..1000, kind in 0usize..2, ag in any::<bool>(), experts in 1u32..40,
                                      toks in prop::collection::vec(prop::collection::vec(0u16..40, 1..4), 0..12)) {
        let cases = all_cases();
        let (c, r, tp) = cases[case % cases.len()];
        let m = map(MappingKind::ALL[kind], WaferGeom::single(c, r), tp, c * r / tp, ag).unwrap();
        let hosts = expert_hosts(experts, m.geom.dies());
        for (e, hs) in hosts.iter().enumerate() {
            prop_assert!(!hs.is_empty());
            prop_assert!(hs.iter().all(|&h| h % experts.min(m.geom.dies()) == e as u32 % m.geom.dies()));
        }
        let toks: Vec<Vec<u16>> = toks.into_iter().map(|t| t.into_iter().map(|e| e % experts as u16).collect()).collect();
        let g = (case as u32) % m.dp;
        let mut routing = vec![Vec::new(); m.dp as usize];
        routing[g as usize] = toks.clone();
        let plan = dispatch_plan(&m, &hosts, &Routing::from_raw(routing));
        prop_assert_eq!(plan.len(), toks.iter().map(|t| t.len()).sum::<usize>());
        let mut i = 0;
        for (t, es) in toks.iter().enumerate() {
            for &e in es {
                let x = plan[i];
                i += 1;
                prop_assert_eq!((x.group, x.token, x.expert), (g, t as u32, e as u32));
                prop_assert!(hosts[e as usize].contains(&x.dst));
                prop_assert_eq!(x.src, m.holder(x.dst, g, t as u32 % tp));
                for &h in &hosts[e as usize] {
                    let d = m.geom.hops(m.holder(h, g, t as u32 % tp), h);
                    prop_assert!(d > x.hops(&m) || (d == x.hops(&m) && h >= x.dst));
                }
            }
        }
    }
}
