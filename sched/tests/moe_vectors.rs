//! The int8 MoE arithmetic against outputs made outside the project: scripts/moe_ref.py
//! (numpy, re-derived from the written contract) froze the sigmoid table, the activation,
//! whole-expert outputs and a small MoE layer in testbenches/vectors/moe_*.json. Every value
//! must match bit-exactly, so a bug shared by the FL reference and the code it checks (the
//! package's functional mode compares against `moe_layer_ref_fl`) cannot cancel out.
//! A missing vector file fails the test.

use sched::pkg::moe::*;
use serde_json::Value;
use std::path::Path;

fn vectors(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbenches/vectors").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (regenerate with scripts/moe_ref.py)", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ints<T: TryFrom<i64>>(v: &Value, field: &str) -> Vec<T>
where
    T::Error: std::fmt::Debug,
{
    v[field].as_array().unwrap_or_else(|| panic!("`{field}` missing")).iter().map(|x| T::try_from(x.as_i64().unwrap()).unwrap()).collect()
}

fn weights(v: &Value, d: usize, f: usize) -> ExpertWeights {
    let w = ExpertWeights { d_model: d, d_ffn: f, w_gate: ints(v, "w_gate"), w_up: ints(v, "w_up"), w_down: ints(v, "w_down") };
    assert_eq!((w.w_gate.len(), w.w_up.len(), w.w_down.len()), (d * f, d * f, f * d));
    w
}

#[test]
fn sigmoid_table_and_activation_match_numpy() {
    let v = vectors("moe_act.json");
    let lut: Vec<i16> = ints(&v, "sigmoid_q8");
    assert_eq!(lut.len(), 256);
    assert_eq!(&SIGMOID_LUT[..], &lut[..]);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() > 1000, "{} cases", cases.len());
    let mut saturated = 0;
    for c in cases {
        let c: Vec<i64> = c.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
        let (g, u, want) = (c[0] as i32, c[1] as i32, c[2] as i8);
        assert_eq!(act_i8(g, u), want, "act_i8({g}, {u})");
        saturated += (want == 127 || want == -128) as usize;
    }
    assert!(saturated > 100, "the clamps are exercised ({saturated})");
}

#[test]
fn expert_ffn_matches_numpy() {
    let v = vectors("moe_expert.json");
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for (i, c) in cases.iter().enumerate() {
        let (d, f, t) = (c["d_model"].as_u64().unwrap() as usize, c["d_ffn"].as_u64().unwrap() as usize, c["tokens"].as_u64().unwrap() as usize);
        let w = weights(c, d, f);
        let x: Vec<i8> = ints(c, "x");
        let h: Vec<i8> = ints(c, "h");
        let y: Vec<i32> = ints(c, "y");
        assert_eq!(gate_up_fl(&x, t, d, &w.w_gate, &w.w_up, f), h, "case {i}: h");
        assert_eq!(expert_ffn_fl(&x, t, &w), y, "case {i}: y");
        // Every micro-slicing sums to the same frozen output.
        for m in 1..=f {
            let mut acc = vec![0i32; t * d];
            for k in 0..m {
                let p = micro_slice_partial_fl(&x, t, d, &w.micro_slice(k, m));
                acc.iter_mut().zip(&p).for_each(|(a, b)| *a = a.wrapping_add(*b));
            }
            assert_eq!(acc, y, "case {i}: M = {m}");
        }
    }
}

#[test]
fn moe_layer_matches_numpy() {
    let v = vectors("moe_layer.json");
    let (d, f) = (v["d_model"].as_u64().unwrap() as usize, v["d_ffn"].as_u64().unwrap() as usize);
    let ws: Vec<ExpertWeights> = v["experts"].as_array().unwrap().iter().map(|e| weights(e, d, f)).collect();
    let routing: Vec<Vec<u16>> = v["routing"].as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|e| e.as_u64().unwrap() as u16).collect()).collect();
    let x: Vec<i8> = ints(&v, "x");
    let out: Vec<i32> = ints(&v, "out");
    assert_eq!(out.len(), routing.len() * d);
    assert!(out.iter().any(|&o| o != 0));
    assert_eq!(moe_layer_ref_fl(&x, &routing, &ws), out);
}
