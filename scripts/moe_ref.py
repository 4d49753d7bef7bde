#!/usr/bin/env python3
"""Frozen int8 MoE reference vectors, computed outside the project (numpy only).

The Rust FL model (sched/src/pkg/moe.rs) is checked against these outputs bit-exactly by
sched/tests/moe_vectors.rs. Nothing here calls or copies the Rust code: every definition is
re-derived from the written contract (module doc of sched/src/pkg/moe.rs):

  expert = SwiGLU FFN, h = act(x @ W_gate, x @ W_up), y = h @ W_down, all int8, row-major,
  wrapping int32 accumulation;
  act(g, u): g_q = sat8(g >> 4), u_q = sat8(u >> 4),
             out = sat8((g_q * sigma_q8(g_q) * u_q) >> 12), arithmetic shifts (floor);
  sigma_q8(i) = PLAN sigmoid (Amin, Curtis, Hayes-Gill 1997) of x = i/16 in Q8:
             PLAN(|x|) = 1 (|x| >= 5), 0.03125|x| + 0.84375 (2.375 <= |x| < 5),
                         0.125|x| + 0.625 (1 <= |x| < 2.375), 0.25|x| + 0.5 (|x| < 1);
             sigma_q8(i) = floor(256 * PLAN(|i|/16)) for i >= 0, 256 - sigma_q8(-i) for i < 0;
  MoE layer: row t = wrapping int32 sum over t's routed experts of expert(x_t) (no gate weights).

Run `python3 scripts/moe_ref.py` from the repository root; it rewrites
testbenches/vectors/moe_{act,expert,layer}.json (committed, so the tests never need numpy).
The numbers are fixed by the seeds below; re-running gives the same bytes.
"""

import json
import os
from fractions import Fraction

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testbenches", "vectors")


def plan_q8(i):
    """PLAN sigmoid of i/16 in Q8, from the paper's real coefficients (exact rationals, floor)."""
    if i < 0:
        return 256 - plan_q8(-i)
    x = Fraction(i, 16)
    if x >= 5:
        y = Fraction(1)
    elif x >= Fraction(19, 8):
        y = Fraction(1, 32) * x + Fraction(27, 32)
    elif x >= 1:
        y = Fraction(1, 8) * x + Fraction(5, 8)
    else:
        y = Fraction(1, 4) * x + Fraction(1, 2)
    return int(np.floor(256 * y))


SIGMA = np.array([plan_q8(i) for i in range(-128, 128)], dtype=np.int64)


def wrap32(a):
    """Two's-complement int32 wrap of int64 values."""
    a = np.asarray(a, dtype=np.int64)
    return ((a + 2**31) % 2**32) - 2**31


def sat8(a):
    return np.clip(a, -128, 127)


def act(g, u):
    g = np.asarray(g, dtype=np.int64)
    u = np.asarray(u, dtype=np.int64)
    gq = sat8(np.floor_divide(g, 16))  # >> 4 rounds toward -inf, as floor division does
    uq = sat8(np.floor_divide(u, 16))
    return sat8(np.floor_divide(gq * SIGMA[gq + 128] * uq, 4096))  # >> 12


def gemm(a, b):
    # int64 products and sums are exact here; wrap to int32 at the end (wrapping add is
    # associative, so wrapping once equals wrapping every step).
    return wrap32(np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64))


def expert(x, wg, wu, wd):
    h = act(gemm(x, wg), gemm(x, wu))
    return gemm(h, wd)


def ints(a):
    return [int(v) for v in np.asarray(a).ravel()]


def act_cases():
    rng = np.random.default_rng(19_001)
    pts = []
    # Every table entry, the shift boundaries, saturation, and the i32 extremes.
    edge = [-(2**31), -(2**31) + 1, -2049, -2048, -2047, -129, -128, -17, -16, -15, -1, 0, 1, 15, 16, 17,
            127, 128, 255, 256, 608, 1280, 2032, 2047, 2048, 2049, 2**31 - 1]
    for g in edge:
        for u in edge:
            pts.append((g, u))
    for gq in range(-128, 128):  # every sigmoid entry, u at full scale both signs
        pts.append((gq * 16, 2047))
        pts.append((gq * 16 + 15, -2048))
    g = rng.integers(-4096, 4096, size=400)
    u = rng.integers(-4096, 4096, size=400)
    pts += list(zip(ints(g), ints(u)))
    gs = np.array([p[0] for p in pts], dtype=np.int64)
    us = np.array([p[1] for p in pts], dtype=np.int64)
    out = act(gs, us)
    return {
        "what": "act_i8(g, u) and the Q8 PLAN sigmoid table, from scripts/moe_ref.py",
        "sigmoid_q8": ints(SIGMA),
        "cases": [[int(a), int(b), int(c)] for a, b, c in zip(gs, us, out)],
    }


def expert_cases():
    rng = np.random.default_rng(19_002)
    cases = []
    # (d_model, d_ffn, tokens, weight range, activation range): the generator's ranges, and
    # the full int8 range so the clamps and the sigmoid's flat ends are exercised.
    for d, f, t, wr, xr in [(8, 6, 3, (-8, 7), (-16, 15)), (16, 12, 5, (-8, 7), (-16, 15)),
                            (24, 20, 4, (-8, 7), (-16, 15)), (12, 9, 6, (-128, 127), (-128, 127)),
                            (1, 1, 2, (-128, 127), (-128, 127)), (32, 7, 3, (-3, 3), (-128, 127))]:
        x = rng.integers(xr[0], xr[1] + 1, size=(t, d))
        wg = rng.integers(wr[0], wr[1] + 1, size=(d, f))
        wu = rng.integers(wr[0], wr[1] + 1, size=(d, f))
        wd = rng.integers(wr[0], wr[1] + 1, size=(f, d))
        y = expert(x, wg, wu, wd)
        cases.append({"d_model": d, "d_ffn": f, "tokens": t, "x": ints(x), "w_gate": ints(wg), "w_up": ints(wu),
                      "w_down": ints(wd), "h": ints(act(gemm(x, wg), gemm(x, wu))), "y": ints(y)})
    return {"what": "expert FFN y = act(x·Wg, x·Wu)·Wd, int8 in, wrapping i32 out, from scripts/moe_ref.py",
            "cases": cases}


def layer_case():
    rng = np.random.default_rng(19_003)
    d, f, e, t, k = 16, 10, 6, 9, 2
    ws = [(rng.integers(-8, 8, size=(d, f)), rng.integers(-8, 8, size=(d, f)), rng.integers(-8, 8, size=(f, d)))
          for _ in range(e)]
    x = rng.integers(-16, 16, size=(t, d))
    routing = [sorted(int(v) for v in rng.choice(e, size=k, replace=False)) for _ in range(t)]
    routing[0] = [5, 0]  # order within a token must not matter
    out = np.zeros((t, d), dtype=np.int64)
    for ti, ids in enumerate(routing):
        for ei in ids:
            out[ti] = wrap32(out[ti] + expert(x[ti:ti + 1], *ws[ei])[0])
    return {"what": "MoE layer: row t = sum over t's experts of expert(x_t), from scripts/moe_ref.py",
            "d_model": d, "d_ffn": f, "x": ints(x), "routing": routing,
            "experts": [{"w_gate": ints(a), "w_up": ints(b), "w_down": ints(c)} for a, b, c in ws],
            "out": ints(out)}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, v in [("moe_act.json", act_cases()), ("moe_expert.json", expert_cases()), ("moe_layer.json", layer_case())]:
        with open(os.path.join(OUT, name), "w") as fh:
            json.dump(v, fh, separators=(",", ":"))
            fh.write("\n")
        print("wrote", os.path.join("testbenches", "vectors", name))


if __name__ == "__main__":
    main()
