#!/usr/bin/env python3
"""Straightforward pandas computation of the figures `hoptrace report` gives.

Usage: report_pandas.py REC_DIR [OUT.json]

Reads every closed segment of a hoptrace recording with pandas (pyarrow
engine), then per stream and per stage (each consecutive hop pair and first
-> last hop): count, min, mean, population stddev, nearest-rank percentiles
p50 p90 p99 p99.9 p99.99 p99.999, max with the seq and time of the packet,
counts above 100us/250us/500us/1ms, negatives; per stream: received,
unique, lost, duplicated, reordered from `seq`, and first-hop inter-arrival
(pacing) statistics. This is the "what users write by hand" baseline of
bench/report_vs_pandas.sh; it is deliberately plain pandas/numpy.
"""
import glob
import json
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

PCTS = [0.50, 0.90, 0.99, 0.999, 0.9999, 0.99999]
THRESHOLDS = [100_000, 250_000, 500_000, 1_000_000]


def stats(v, seq=None, t=None):
    n = len(v)
    if n == 0:
        return {"count": 0}
    a = np.sort(v)
    out = {
        "count": int(n),
        "min_ns": int(a[0]),
        "mean_ns": float(v.mean()),
        "stddev_ns": float(v.std(ddof=0)),
        "max_ns": int(a[-1]),
        "negative_count": int((v < 0).sum()),
        # nearest rank: k = max(1, ceil(p n))
        "percentiles": [
            {"p": p, "value_ns": int(a[max(1, int(np.ceil(p * n - 1e-9 * n))) - 1])}
            for p in PCTS
        ],
        "above": [{"threshold_ns": th, "count": int((v > th).sum())} for th in THRESHOLDS],
    }
    if seq is not None:
        i = int(np.argmax(v))
        out["max_packet"] = {"seq": int(seq[i]), "time_ns": int(t[i])}
    return out


def main():
    rec = sys.argv[1]
    files = sorted(glob.glob(f"{rec}/segment-*.parquet"))
    meta = json.loads(pq.read_schema(files[0]).metadata[b"hoptrace"])
    hops = [h["column"] for h in meta["hops"]]
    names = [h["name"] for h in meta["hops"]]
    df = pd.concat(pd.read_parquet(f, columns=["stream", "seq"] + hops) for f in files)
    stages = [(i - 1, i) for i in range(1, len(hops))]
    if len(hops) > 2:
        stages.append((0, len(hops) - 1))
    result = {"streams": []}
    for name, g in df.groupby("stream", sort=True):
        seq = g["seq"].to_numpy()
        unique = len(np.unique(seq))
        cummax = np.maximum.accumulate(seq)
        st = {
            "name": name,
            "sequence": {
                "received": int(len(seq)),
                "unique": int(unique),
                "lost": int(seq.max() - seq.min() + 1 - unique),
                "duplicated": int(len(seq) - unique),
                "reordered": int((seq[1:] < cummax[:-1]).sum()),
            },
            "pacing": stats(np.diff(g[hops[0]].dropna().to_numpy())),
            "stages": [],
        }
        for a, b in stages:
            ok = g[hops[a]].notna() & g[hops[b]].notna()
            ta = g.loc[ok, hops[a]].to_numpy()
            v = g.loc[ok, hops[b]].to_numpy() - ta
            st["stages"].append(
                {"stage": f"{names[a]}..{names[b]}", "stats": stats(v, g.loc[ok, "seq"].to_numpy(), ta)}
            )
        result["streams"].append(st)
    out = json.dumps(result, indent=1)
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(out)
    else:
        print(out)


if __name__ == "__main__":
    main()
