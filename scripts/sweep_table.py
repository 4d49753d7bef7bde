#!/usr/bin/env python3
"""Markdown tables from `waferstream sweep` JSON lines (docs/results-fsedp.md).

usage: scripts/sweep_table.py FILE.jsonl [--cols a,b,...] [--pivot ROWKEY:COLKEY:VALUE]

Columns are result keys or dotted paths (`roofline.bound`, `cycles.d2d_wait`,
`point.strategy`); derived columns:
  pe              the point's PE array (rows x cols, timing, fused)
  frac.<part>     a cycle-breakdown part as % of chiplets x latency
  mem.<key>       a byte count in MB
  sum.<key>       a per-chiplet counter summed over chiplets (sum.reloads)
Lines are sorted by their grid id.
"""
import json, sys

def pe(j):
    p = j["config"]["package"]["pe"]
    s = f'{p["rows"]}x{p["cols"]} {p["dataflow"]}'
    s += " db" if p["timing"] == "double_buffered" else ""
    s += " fused" if p.get("fuse_gate_up") else ""
    return s

def get(j, k):
    if k == "pe":
        return pe(j)
    if k == "array":
        c = j["config"]["package"]
        return f'{c["rows"]}x{c["cols"]}'
    if k.startswith("frac."):
        n = len(j["chiplets"])
        return 100.0 * j["cycles"][k[5:]] / (n * j["latency_cycles"])
    if k.startswith("mem."):
        return get(j, k[4:]) / 1e6
    if k.startswith("sum."):
        return sum(c[k[4:]] for c in j["chiplets"])
    v = j
    for part in k.split("."):
        if part == "point":
            v = dict(v["point"]) if isinstance(v["point"], list) else v["point"]
            continue
        v = v[part]
    return v

def fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)

def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    lines = [json.loads(l) for l in open(args[0]) if l.strip()]
    lines.sort(key=lambda j: j["id"])
    if "--pivot" in args:
        rk, ck, vk = args[args.index("--pivot") + 1].split(":")
        rows, cols, cell = [], [], {}
        for j in lines:
            r, c = tuple(fmt(get(j, k)) for k in rk.split("+")), fmt(get(j, ck))
            rows += [r] if r not in rows else []
            cols += [c] if c not in cols else []
            cell[(r, c)] = fmt(get(j, vk))
        print("| " + " | ".join(rk.split("+") + cols) + " |")
        print("|" + "---|" * (len(rk.split("+")) + len(cols)))
        for r in rows:
            print("| " + " | ".join(list(r) + [cell.get((r, c), "") for c in cols]) + " |")
        return
    cols = args[args.index("--cols") + 1].split(",") if "--cols" in args else ["key", "latency_cycles"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for j in lines:
        print("| " + " | ".join(fmt(get(j, k)) for k in cols) + " |")

if __name__ == "__main__":
    main()
