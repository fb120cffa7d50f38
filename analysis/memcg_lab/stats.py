"""Per-arm statistics and the comparison against a baseline arm.

Stddev is the sample standard deviation (n-1), as mmtests reports it;
CoeffVar is Stddev / |mean| in %.  A difference is called significant
when Welch's t-test (unequal variances) gives p < ALPHA; whether the
arms' [min, max] ranges overlap is reported beside it, since with a
handful of runs a t-test alone is easily fooled by one odd run.
"""
import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from memcg_lab import metrics as mx

ALPHA = 0.05
PERCENTILES = [50, 90, 99]


def describe(values):
    a = np.asarray(values, dtype=float)
    n = len(a)
    mean = float(a.mean()) if n else math.nan
    std = float(a.std(ddof=1)) if n > 1 else math.nan
    cov = std / abs(mean) * 100 if n > 1 and mean != 0 else math.nan
    return {"n": n, "mean": mean, "stddev": std, "coeffvar": cov,
            "min": float(a.min()) if n else math.nan, "max": float(a.max()) if n else math.nan}


def welch(a, b):
    """(t, p) of Welch's t-test, (nan, nan) when either side has fewer
    than two runs or neither side varies."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return math.nan, math.nan
    t, p = sps.ttest_ind(a, b, equal_var=False)
    return float(t), float(p)


def ranges_overlap(a, b):
    return bool(min(a) <= max(b) and min(b) <= max(a))


def _pct(base, new, better):
    if base is None or new is None or math.isnan(base) or math.isnan(new):
        return math.nan
    v = mx.improvement_pct(base, new, better)
    return math.nan if v is None else v


def compare(metric_table, arms, baseline, metric_list=mx.METRICS):
    """Tidy rows (metric, arm, n, mean, stddev, coeffvar, min, max,
    pct_mean, pct_stddev, pct_coeffvar, welch_t, welch_p, significant,
    ranges_overlap) for the arms of one scenario.  metric_table is
    collect.Dataset.metrics restricted to that scenario."""
    if baseline not in arms:
        raise ValueError(f"baseline arm {baseline!r} has no valid runs (arms: {', '.join(arms)})")
    rows = []
    for m in metric_list:
        sel = metric_table[metric_table["metric"] == m.name]
        values = {arm: sel[sel["arm"] == arm]["value"].to_numpy() for arm in arms}
        if not any(len(v) for v in values.values()):
            continue
        base = describe(values[baseline])
        for arm in arms:
            d = describe(values[arm])
            row = {"metric": m.name, "label": m.label, "unit": m.unit, "better": m.better,
                   "arm": arm, "baseline": baseline, **d,
                   "pct_mean": _pct(base["mean"], d["mean"], m.better),
                   # Less spread is better whatever the metric's direction.
                   "pct_stddev": _pct(base["stddev"], d["stddev"], "lower"),
                   "pct_coeffvar": _pct(base["coeffvar"], d["coeffvar"], "lower"),
                   "welch_t": math.nan, "welch_p": math.nan, "significant": False,
                   "ranges_overlap": None}
            if arm != baseline and d["n"] and base["n"]:
                t, p = welch(values[baseline], values[arm])
                row.update(welch_t=t, welch_p=p, significant=bool(p < ALPHA),
                           ranges_overlap=ranges_overlap(values[baseline], values[arm]))
            rows.append(row)
    return pd.DataFrame(rows)


def latency_percentiles(probe, fio, arms):
    """Rows (source, arm, n, p50, p90, p99, max) in ms.  Probe bursts of
    all runs of an arm are pooled; fio only reports percentiles per run,
    so its rows are the mean over runs of each run's percentile."""
    rows = []
    for arm in arms:
        lat = probe[probe["arm"] == arm]["latency_us"].to_numpy(dtype=float) / 1e3
        if len(lat):
            rows.append({"source": "probe fault latency (pooled bursts)", "arm": arm,
                         "n": len(lat), **{f"p{q}": float(np.percentile(lat, q))
                                           for q in PERCENTILES},
                         "max": float(lat.max())})
        for (job, direction), f in fio[fio["arm"] == arm].groupby(["job", "direction"]):
            per_run = f.pivot_table(index="run", columns="stat", values="value_us")
            wanted = [f"p{q}" for q in PERCENTILES] + ["max"]
            if not set(wanted) <= set(per_run.columns):
                continue
            means = per_run[wanted].mean() / 1e3
            rows.append({"source": f"fio {job} {direction} clat (mean of runs)", "arm": arm,
                         "n": len(per_run), **means.to_dict()})
    return pd.DataFrame(rows, columns=["source", "arm", "n"] + [f"p{q}" for q in PERCENTILES]
                        + ["max"])


def arms_with_data(table, arms):
    """The arms, in order, that have rows in a tidy table."""
    present = set(table["arm"])
    return [a for a in arms if a in present]


def pooled_histogram(hist, arms):
    """Rows (arm, bucket_lo_us, bucket_hi_us, count, share_pct): the probe
    histograms (collect.Dataset.probe_histogram) of each arm's runs summed,
    over the buckets from the lowest to the highest non-empty one of any
    arm; share_pct is of the arm's bursts."""
    arms = arms_with_data(hist, arms)
    columns = ["arm", "bucket_lo_us", "bucket_hi_us", "count", "share_pct"]
    counts = (hist[hist["arm"].isin(arms)]
              .groupby(["bucket_lo_us", "bucket_hi_us", "arm"])["count"].sum()
              .unstack("arm", fill_value=0).sort_index())
    used = counts.index[counts.sum(axis=1).to_numpy() > 0]
    if not len(used):
        return pd.DataFrame(columns=columns)
    counts = counts.loc[used[0]:used[-1], arms]
    shares = counts / counts.sum() * 100
    rows = [{"arm": arm, "bucket_lo_us": lo, "bucket_hi_us": hi,
             "count": int(counts.loc[(lo, hi), arm]), "share_pct": float(shares.loc[(lo, hi), arm])}
            for arm in arms for lo, hi in counts.index]
    return pd.DataFrame(rows, columns=columns)
