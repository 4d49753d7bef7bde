//! `SemMoeLutRtl` against `SemMoeLutCl` in lockstep: random token tables (or none), n-gram
//! tables, batches and device counts (`semmoe_lut_swap::random_batch`: exact id hits, ties
//! between neighbouring ids, ids below and above the table, histories without an n-gram row,
//! confidences that tie between the two tables). Every cycle, every register the CL traces
//! (`SemMoeLutCl::signals`: state, j, token id, both table hits with their confidences, pred,
//! spill length, per device the histogram count and the group fill) from the block's ports;
//! at the end `shf`, the ranks and the cycle count. Then the stand-in behind
//! `hw::wafer::semmoe_lut::SemMoeLutModel` and its refusals.

mod common;

use hw::harness::{Cycle, SignalSink};
use hw::wafer::semmoe_lut::{semmoe_lut_cl, SemMoeLutCl};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::wafer::semmoe_lut_swap::{random_batch, semmoe_lut_factory, LutImage, SemMoeLutDriver};

/// Every cycle's full sample, rebuilt from a change stream.
#[derive(Default)]
struct Rows {
    rows: Vec<Vec<u64>>,
    width: usize,
}

impl SignalSink for Rows {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), hw::Error> {
        while self.rows.len() <= cycle as usize {
            let prev = self.rows.last().cloned().unwrap_or_else(|| vec![0; self.width]);
            self.rows.push(prev);
        }
        self.rows[cycle as usize][sig] = value;
        Ok(())
    }
}

impl Rows {
    /// Cycles 0..=`last` (a run's last cycles may change nothing).
    fn pad(&mut self, last: u64) {
        while self.rows.len() <= last as usize {
            let prev = self.rows.last().cloned().unwrap_or_else(|| vec![0; self.width]);
            self.rows.push(prev);
        }
    }
}

/// The exported size with its narrow index width (IW = 4: positions ≤ 8, devices < 4) in
/// lockstep with the CL: every traced value every cycle, then `shf`, ranks and cycles (the
/// other lockstep tests run a wider build at the driver's default IW = 16).
#[test]
fn exported_build_in_lockstep_with_the_cl() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(26);
    for _ in 0..40 {
        let (n, devices) = (rng.gen_range(1..=8usize), rng.gen_range(2..=4u32));
        let (rows, lookback, layer) = (rng.gen_range(0..=12usize), rng.gen_range(0..=2u32), rng.gen_range(0..=2usize));
        let (table, ngram, tokens) = random_batch(&mut rng, n, devices, rows, lookback, layer);
        let cl = SemMoeLutCl::new(table.as_ref(), &ngram, layer, devices, tokens.clone());
        let mut want = Rows { width: cl.signals().len(), ..Default::default() };
        let (shf, rank, cycles) = cl.run_traced(&mut want).unwrap();
        want.pad(cycles);
        let img = LutImage::new(table.as_ref(), &ngram, layer, devices, &tokens);
        let mut drv = SemMoeLutDriver::<8, 4, 4, 5, 4>::load(&img);
        for (c, row) in want.rows.iter().enumerate() {
            let mut got = Vec::new();
            drv.sample(&mut got);
            assert_eq!(&got, row, "n {n}, devices {devices}, rows {rows}, lookback {lookback}, layer {layer}: cycle {c}");
            if c + 1 < want.rows.len() {
                drv.edge();
            }
        }
        assert!(drv.done());
        assert_eq!(drv.result(), (shf, rank, cycles));
    }
}

/// One batch in lockstep; returns the cycles.
fn lockstep(seed: u64, n: usize, devices: u32, rows: usize, lookback: u32, layer: usize) -> u64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (table, ngram, tokens) = random_batch(&mut rng, n, devices, rows, lookback, layer);
    let cl = SemMoeLutCl::new(table.as_ref(), &ngram, layer, devices, tokens.clone());
    let width = cl.signals().len();
    let mut want = Rows { width, ..Default::default() };
    let (shf, rank, cycles) = cl.run_traced(&mut want).unwrap();
    want.pad(cycles);
    let img = LutImage::new(table.as_ref(), &ngram, layer, devices, &tokens);
    let mut drv = SemMoeLutDriver::<64, 8, 8, 8>::load(&img);
    let name = format!("semmoe_lut_seed{seed}_n{n}_d{devices}_r{rows}_lb{lookback}_l{layer}");
    let mut tr = common::LockstepTrace::named(&name);
    let names: Vec<String> = SemMoeLutCl::new(None, &ngram, layer, devices, Vec::new()).signals().iter().map(|s| format!("{}.{}", s.scope.last().unwrap(), s.name)).collect();
    for (c, row) in want.rows.iter().enumerate() {
        tr.cycle(c as u64);
        let mut got = Vec::new();
        drv.sample(&mut got);
        for (i, (&w, &g)) in row.iter().zip(&got).enumerate() {
            tr.expect(&names[i], 64, w, g);
        }
        if c + 1 < want.rows.len() {
            drv.edge();
        }
    }
    assert!(drv.done(), "{name}: the RTL is not done when the CL is ({cycles} cycles)");
    let (rshf, rrank, rcycles) = drv.result();
    assert_eq!((rshf, rrank, rcycles), (shf, rank, cycles), "{name}: results");
    cycles
}

#[test]
fn fixed_shapes() {
    let mut total = 0;
    // The semmoe CLI test's shape (4 devices, lookback 2, layer 1), with and without ids.
    total += lockstep(1, 64, 4, 200, 2, 1);
    total += lockstep(2, 64, 4, 0, 2, 1);
    total += lockstep(3, 37, 8, 255, 2, 2);
    total += lockstep(4, 1, 2, 1, 0, 0);
    total += lockstep(5, 16, 3, 5, 1, 2);
    total += lockstep(6, 50, 7, 3, 2, 2);
    assert!(total > 1000, "{total} cycles");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_batches(seed in any::<u64>(), n in 1usize..=64, devices in 2u32..=8, rows in 0usize..=255, lookback in 0u32..=2, layer in 0usize..=3) {
        lockstep(seed, n, devices, rows, lookback, layer);
    }
}

/// The stand-in gives the CL's waveform and results through the trait.
#[test]
fn stand_in_equals_cl_through_the_trait() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    for _ in 0..4 {
        let (n, devices) = (rng.gen_range(1..=128), rng.gen_range(2..=8));
        let (table, ngram, tokens) = random_batch(&mut rng, n, devices, 300, 2, 1);
        let cl = semmoe_lut_cl(table.as_ref(), &ngram, 1, devices, tokens.clone()).unwrap();
        let rtl = semmoe_lut_factory(table.as_ref(), &ngram, 1, devices, tokens).unwrap();
        assert_eq!(cl.signals(), rtl.signals());
        let (mut a, mut b) = (Rows { width: cl.signals().len(), ..Default::default() }, Rows { width: rtl.signals().len(), ..Default::default() });
        let ra = cl.run_traced(&mut a).unwrap();
        let rb = rtl.run_traced(&mut b).unwrap();
        assert_eq!(ra, rb);
        a.pad(ra.2);
        b.pad(rb.2);
        assert_eq!(a.rows, b.rows);
    }
}

#[test]
fn stand_in_refuses_what_it_was_not_built_for() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let (table, ngram, tokens) = random_batch(&mut rng, 1025, 4, 10, 2, 1);
    let e = semmoe_lut_factory(table.as_ref(), &ngram, 1, 4, tokens).err().unwrap().to_string();
    assert!(e.contains("tp_batch") && e.contains("1025") && e.contains("1024"), "{e}");
    let (table, ngram, tokens) = random_batch(&mut rng, 8, 65, 10, 2, 1);
    let e = semmoe_lut_factory(table.as_ref(), &ngram, 1, 65, tokens).err().unwrap().to_string();
    assert!(e.contains("devices") && e.contains("65"), "{e}");
    let (table, ngram, tokens) = random_batch(&mut rng, 8, 20, 10, 4, 1);
    let ngram = sched::balance::semmoe::NGramTable { lookback: 4, ..ngram };
    let e = semmoe_lut_factory(table.as_ref(), &ngram, 1, 20, tokens).err().unwrap().to_string();
    assert!(e.contains("lookback"), "{e}");
}
