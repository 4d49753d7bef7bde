//! `ExpertTableRtl` (the chiplet controller's per-expert tables) against plain arrays of
//! counts and flags: a grant sets the expert's next-hop mask, its granted bit and (when this
//! chiplet is on the mask) its micro-slices left = m, all seen in the same cycle by the
//! lookups; a PE done takes one micro-slice off `left` and says whether it was the last; a
//! token arrival takes `n` off the missing tokens and sets the tokens-here bit at 0; a table
//! write sets m, the missing tokens and the tokens-here bit (from the registered bits, so a
//! token arrival of the same cycle is dropped); a layer start clears the granted bits, a
//! reset the granted and tokens-here bits. Every output every cycle, E = 1, 4, 16, 64, 256,
//! and a proptest over seeds at 16 / 128.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::expert_table::ExpertTableRtl;
use rust_hdl::prelude::*;

use common::settle;

/// The tables as the CL holds them (one entry per expert).
#[derive(Clone, Default)]
struct Tables {
    m: Vec<u16>,
    left: Vec<u16>,
    miss: Vec<u32>,
    nh: Vec<u16>,
    granted: Vec<bool>,
    tok_ok: Vec<bool>,
}

fn bits_of(v: &[bool]) -> Vec<bool> {
    v.to_vec()
}

fn read_bits<const N: usize>(b: Bits<N>) -> Vec<bool> {
    (0..N).map(|i| b.get_bit(i)).collect()
}

fn run<const E: usize>(cycles: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = ExpertTableRtl::<E>::new();
    u.connect_all();
    settle(&mut u);
    // Power-up: every register 0.
    let mut t = Tables { m: vec![0; E], left: vec![0; E], miss: vec![0; E], nh: vec![0; E], granted: vec![false; E], tok_ok: vec![false; E] };
    let (mut n_last, mut n_tok_ok, mut n_grant_seen) = (0, 0, 0);
    let ex = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(0..E);
    for c in 0..cycles {
        let reset = c == 0 || rng.gen_ratio(1, 400);
        let layer_start = rng.gen_ratio(1, 150);
        let cfg_we = rng.gen_bool(0.12);
        let (cfg_e, cfg_m, cfg_tok) = (ex(&mut rng), rng.gen_range(0..6u16), if rng.gen_bool(0.4) { 0 } else { rng.gen_range(0..25u32) });
        let sx = ex(&mut rng);
        let grant = rng.gen_bool(0.25);
        let mask: u16 = rng.gen();
        let on = rng.gen_bool(0.6);
        // Lookups of the grant's own expert now and then (the look-through).
        let pick = |rng: &mut Xoshiro256PlusPlus| if rng.gen_bool(0.25) { sx } else { ex(rng) };
        let nhx = [pick(&mut rng), pick(&mut rng)];
        let done = rng.gen_bool(0.35);
        let de = pick(&mut rng);
        let tok = rng.gen_bool(0.25);
        let (te, tn) = (ex(&mut rng), rng.gen_range(0..6u32));
        u.reset.next = reset;
        u.layer_start.next = layer_start;
        u.cfg_we.next = cfg_we;
        u.cfg_expert.next = (cfg_e as u64).into();
        u.cfg_m.next = (cfg_m as u64).into();
        u.cfg_tokens.next = (cfg_tok as u64).into();
        u.sched_expert.next = (sx as u64).into();
        u.grant.next = grant;
        u.grant_mask.next = (mask as u64).into();
        u.grant_on.next = on;
        for r in 0..2 {
            u.nh_expert[r].next = (nhx[r] as u64).into();
        }
        u.done_valid.next = done;
        u.done_expert.next = (de as u64).into();
        u.tok_valid.next = tok;
        u.tok_expert.next = (te as u64).into();
        u.tok_n.next = (tn as u64).into();
        settle(&mut u);

        // The reference, in the CL's order: A (grant), B/I lookups, D (PE done), E (tokens).
        let m_s = t.m[sx];
        let mut a = t.clone();
        if grant {
            a.granted[sx] = true;
            a.nh[sx] = mask;
            if on {
                a.left[sx] = m_s;
            }
        }
        let ctx = format!("E {E} seed {seed} cycle {c}");
        assert_eq!(u.m_s.val().to_u64(), m_s as u64, "{ctx}: m_s");
        assert_eq!(read_bits(u.granted.val()), bits_of(&t.granted), "{ctx}: granted");
        assert_eq!(read_bits(u.granted_a.val()), bits_of(&a.granted), "{ctx}: granted_a");
        for r in 0..2 {
            assert_eq!(u.nh_mask[r].val().to_u64(), a.nh[nhx[r]] as u64, "{ctx}: nh_mask[{r}] of expert {}", nhx[r]);
        }
        n_grant_seen += (grant && nhx.contains(&sx)) as usize;
        let last = done && a.left[de] == 1;
        if done {
            a.left[de] = a.left[de].wrapping_sub(1);
        }
        assert_eq!(u.done_last.val(), last, "{ctx}: done_last of expert {de}");
        n_last += last as usize;
        if tok {
            a.miss[te] = a.miss[te].wrapping_sub(tn);
            a.tok_ok[te] = a.miss[te] == 0;
        }
        assert_eq!(read_bits(u.tok_ok_a.val()), bits_of(&a.tok_ok), "{ctx}: tok_ok_a");
        n_tok_ok += (tok && a.tok_ok[te]) as usize;

        // The edge: layer start, table write, reset.
        if layer_start {
            a.granted = vec![false; E];
        }
        if cfg_we {
            a.m[cfg_e] = cfg_m;
            a.miss[cfg_e] = cfg_tok;
            a.tok_ok = t.tok_ok.clone();
            a.tok_ok[cfg_e] = cfg_tok == 0;
        }
        if reset {
            a.granted = vec![false; E];
            a.tok_ok = vec![false; E];
        }
        t = a;
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(n_last > 0 && n_tok_ok > 0 && n_grant_seen > 0, "coverage: last micro-slices {n_last}, tokens complete {n_tok_ok}, grants looked through {n_grant_seen}");
}

#[test]
fn expert_table_small() {
    run::<1>(2000, 1);
    run::<4>(5000, 2);
}

#[test]
fn expert_table_e16() {
    run::<16>(10_000, 3);
}

#[test]
fn expert_table_wide() {
    run::<64>(5000, 4);
    run::<256>(3000, 5);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    /// Seeds at E = 16 (the exported size) and 128 (a package size).
    #[test]
    fn expert_table_proptest(seed in any::<u64>(), wide in any::<bool>()) {
        if wide {
            run::<128>(1500, seed);
        } else {
            run::<16>(2000, seed);
        }
    }
}
