"""Per-arm statistics and the comparison against a baseline arm.

Stddev is the sample standard deviation (n-1), as mmtests reports it;
CoeffVar is Stddev / |mean| in %.  A difference is called significant
when Welch's t-test (unequal variances) gives p < ALPHA; whether the
arms' [min, max] ranges overlap is reported beside it, since with a
handful of runs a t-test alone is easily fooled by one odd run.
"""
import math
import os

import numpy as np
import pandas as pd
from scipy import stats as sps

from memcg_lab import collect, run
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


def binned_percentile(values, counts, q):
    """The q-th percentile (0-100) of a histogram: the least bin value
    whose cumulative count reaches q% of the total (fio's own rule for
    its percentiles)."""
    order = np.argsort(values)
    v, c = np.asarray(values, dtype=float)[order], np.asarray(counts, dtype=float)[order]
    cum = np.cumsum(c)
    return float(v[np.searchsorted(cum, cum[-1] * q / 100.0)])


def latency_percentiles(probe, fio, arms, fio_bins=None):
    """Rows (source, arm, n, p50, p90, p99, max) in ms.  Probe bursts of
    all runs of an arm are pooled.  fio's json+ latency histograms
    (fio_bins, a collect.Dataset.fio_bins table) of all runs of an arm
    are summed and the percentiles taken of the sum, n being the I/Os;
    for an arm with a run without histograms (runs from before json+)
    the row is the mean over runs of each run's percentile, and says so:
    a mean of p99s is not a p99."""
    rows = []
    bins = fio_bins if fio_bins is not None else pd.DataFrame(
        columns=["arm", "run", "job", "direction", "lat_us", "count"])
    for arm in arms:
        lat = probe[probe["arm"] == arm]["latency_us"].to_numpy(dtype=float) / 1e3
        if len(lat):
            rows.append({"source": "probe fault latency (pooled bursts)", "arm": arm,
                         "n": len(lat), **{f"p{q}": float(np.percentile(lat, q))
                                           for q in PERCENTILES},
                         "max": float(lat.max())})
        for (job, direction), f in fio[fio["arm"] == arm].groupby(["job", "direction"]):
            runs = set(f["run"])
            b = bins[(bins["arm"] == arm) & (bins["job"] == job) & (bins["direction"] == direction)]
            if runs and runs <= set(b["run"]):
                pooled = b.groupby("lat_us")["count"].sum()
                values, counts = pooled.index.to_numpy(), pooled.to_numpy()
                rows.append({"source": f"fio {job} {direction} clat (pooled, {len(runs)} runs)",
                             "arm": arm, "n": int(counts.sum()),
                             **{f"p{q}": binned_percentile(values, counts, q) / 1e3
                                for q in PERCENTILES},
                             "max": float(values[counts > 0].max()) / 1e3})
                continue
            per_run = f.pivot_table(index="run", columns="stat", values="value_us")
            wanted = [f"p{q}" for q in PERCENTILES] + ["max"]
            if not set(wanted) <= set(per_run.columns):
                continue
            means = per_run[wanted].mean() / 1e3
            rows.append({"source": f"fio {job} {direction} clat (mean of per-run percentiles: "
                         "no json+ bins)", "arm": arm,
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


# The 2011 cover letter's per-test table (seed 001): the alloc program's
# times and THP figures, then the vmstat block.
HPAGE_KB = 2048  # AnonHugePages per THP on x86_64, the lab's guest
WRITEBACK_CP_ALLOC = [
    mx.Metric("sys_s", "System Time", "s", "lower"),
    mx.Metric("user_s", "User Time", "s", "lower"),
    mx.Metric("elapsed_s", "Elapsed Time", "s", "lower"),
    mx.Metric("thp_active", "THP Active", "huge pages", "higher"),
    mx.Metric("thp_fault_alloc", "Fault Alloc", "count", "higher"),
    mx.Metric("thp_fault_fallback", "Fault Fallback", "count", "lower"),
]


def _ratio(a, b, scale=1.0):
    return a / b * scale if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _vmstat_rows(mean, velocity):
    """(label, unit, value) of the vmstat block; mean(key) is an arm's mean
    per iteration of a counter, NaN when its kernel lacks it.  Efficiencies
    are ratios of means, i.e. of the totals over all iterations; velocity(key)
    is pages per second of alloc time over the iterations that have one."""
    d, k = mean("pgscan_direct"), mean("pgscan_kswapd")
    return [
        ("Direct pages scanned", "pages", d),
        ("Kswapd pages scanned", "pages", k),
        ("Kswapd pages reclaimed", "pages", mean("pgsteal_kswapd")),
        ("Direct pages reclaimed", "pages", mean("pgsteal_direct")),
        ("Kswapd efficiency", "%", _ratio(mean("pgsteal_kswapd"), k, 100)),
        ("Kswapd velocity", "pages/s", velocity("pgscan_kswapd")),
        ("Direct efficiency", "%", _ratio(mean("pgsteal_direct"), d, 100)),
        ("Direct velocity", "pages/s", velocity("pgscan_direct")),
        ("Percentage direct scans", "%", _ratio(d, d + k, 100)),
        ("Page reclaim immediate", "pages", mean("nr_vmscan_immediate_reclaim")),
        ("Page rescued immediate", "pages", mean("pgrescued")),
        ("Pages parked immediate", "pages", mean("pgimmediate_parked")),
        ("Compaction stalls", "count", mean("compact_stall")),
        ("Compaction success", "count", mean("compact_success")),
        ("Compaction failures", "count", mean("compact_fail")),
        # The alloc's worst outcome: its iteration then has no alloc
        # figures, only these counters.
        ("OOM kills", "count", mean("oom_kill")),
        # Over the whole iteration (copy and alloc), from the hist of
        # vmscan:mm_vmscan_throttled: sleeping instead of scanning.
    ] + [(f"Reclaim throttled ({reason}), iteration", "s", mean(f"throttle.{reason}_s"))
         for reason in run.THROTTLE_REASONS]


def writeback_cp(iterations, arms, baseline):
    """Rows (section, label, unit, arm, runs, n, mean, stddev, pct_mean,
    pct_stddev) of the cover-letter table, over every iteration of every
    run of an arm (collect.Dataset.writeback_cp of one scenario).  Section
    "alloc" compares lab-alloc's figures with the baseline as stats.compare
    does; section "vmstat" is the mean per iteration of the counters the
    scenario took around each alloc.  NaN where a kernel lacks a counter."""
    it = iterations.assign(thp_active=iterations["anon_huge_kb"] / HPAGE_KB)
    tidy = it.melt(id_vars=["arm"], value_vars=[m.name for m in WRITEBACK_CP_ALLOC],
                   var_name="metric").dropna(subset=["value"])
    cmp = compare(tidy, arms, baseline, WRITEBACK_CP_ALLOC)
    cmp = cmp.set_index(["metric", "arm"]) if len(cmp) else cmp
    runs = it.groupby("arm")["run"].nunique()
    rows = []
    for m in WRITEBACK_CP_ALLOC:
        for arm in arms:
            r = cmp.loc[(m.name, arm)] if (m.name, arm) in cmp.index else {}
            rows.append({"section": "alloc", "label": m.label, "unit": m.unit, "arm": arm,
                         "runs": runs[arm], "n": int(r.get("n", 0)),
                         **{c: r.get(c, math.nan) for c in
                            ("mean", "stddev", "pct_mean", "pct_stddev")}})
    for arm in arms:
        f = it[it["arm"] == arm]

        def counter(frame, key):
            return frame.get("vmstat." + key, frame.get(key))

        def mean(key):
            col = counter(f, key)
            return math.nan if col is None else float(col.mean())

        # An iteration whose alloc was OOM-killed has counters but no
        # alloc time: its scans must not be divided by the others' time.
        timed = f[f["elapsed_s"].notna()] if "elapsed_s" in f else f.iloc[0:0]

        def velocity(key):
            col = counter(timed, key)
            return (math.nan if col is None or not len(timed)
                    else _ratio(float(col.sum()), float(timed["elapsed_s"].sum())))

        rows += [{"section": "vmstat", "label": label, "unit": unit, "arm": arm,
                  "runs": runs[arm], "n": len(f), "mean": value}
                 for label, unit, value in _vmstat_rows(mean, velocity)]
    return pd.DataFrame(rows, columns=["section", "label", "unit", "arm", "runs", "n", "mean",
                                       "stddev", "pct_mean", "pct_stddev"])


# The 2011 figures beside the lab's (issue 20 item 3): seed2011.csv, by hand
# from the cover letter, and the comparison both sides make.
SEED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed2011.csv")
# (scenario, THP) -> (2011 test, its stick's filesystem): writeback-cp's
# THP=never runs are the mail's "Base" tests (THP disabled).
SEED_TESTS = {("writeback-cp", "always"): ("writebackCPDevicevfat", "vfat"),
              ("writeback-cp", "never"): ("writebackCPDeviceBasevfat", "vfat"),
              ("writeback-cp-ext4", "always"): ("writebackCPDeviceext4", "ext4"),
              ("writeback-cp-ext4", "never"): ("writebackCPDeviceBaseext4", "ext4")}
# The one 2011 step that adds LRU_IMMEDIATE and nothing else is patches
# 1-10 (freemore) -> 1-11 (isolate).  The lab's counterpart is each arm
# that leaves writeback folios where reclaim finds them again -> immediate:
# keep (3.2-like: left on the inactive list and rescanned, the 2011
# freemore kernel's behaviour) and activate (6.1 upstream, the series'
# default: moved to the active list).
SEED_STEP = ("freemore-v6r1", "isolate-v6r1")
LAB_BASELINES = ("keep", "activate")
LAB_TREATMENT = "immediate"
# A relative change under this (%) on either side has no direction worth
# comparing: the mail rounds its means to two decimals (User Time 0.05 is
# anything from 0.045 to 0.055) and its efficiencies to whole percents.
FLAT_PCT = 5.0
BESIDE_2011_COLUMNS = ["test", "label", "unit", "seed_baseline", "seed_baseline_value",
                       "seed_kernel", "seed_value", "seed_pct", "baseline", "baseline_mean",
                       "arm", "mean", "lab_pct", "direction"]


def load_seed(path=SEED_FILE):
    """The transcription as rows (test, section, label, kernel, value,
    stddev): value is the mean (section alloc), seconds (duration) or the
    total over the test (vmstat); stddev only where the mail gives one."""
    wide = pd.read_csv(path, comment="#")
    kernels = list(wide.columns[4:])
    long = wide.melt(id_vars=["test", "section", "label", "stat"], value_vars=kernels,
                     var_name="kernel")
    long["stat"] = long["stat"].where(long["stat"] == "stddev", "value")
    return (long.pivot_table(index=["test", "section", "label", "kernel"], columns="stat",
                             values="value", sort=False)
            .reindex(columns=["value", "stddev"]).reset_index().rename_axis(columns=None))


def seed_test(scenario, params):
    """The 2011 test a run of scenario with resolved parameters params
    repeats, or None: another THP mode (madvise), or a stick SET to
    another filesystem than the test's."""
    test, fs = SEED_TESTS.get((scenario, params.get("THP")), (None, None))
    return test if test and params.get("STICK_FS", fs) == fs else None


def change_pct(base, new):
    """(new - base) / |base| in %, NaN when either is; from 0, +-inf
    (the sign is all a direction needs)."""
    if base is None or new is None or math.isnan(base) or math.isnan(new):
        return math.nan
    if base == 0:
        return math.copysign(math.inf, new) if new else 0.0
    return mx.improvement_pct(base, new, "higher")


def direction(seed_pct, lab_pct, flat=FLAT_PCT):
    """same / opposite: the changes' signs agree or not; flat: either is
    under flat %; n/a: either is missing."""
    if math.isnan(seed_pct) or math.isnan(lab_pct):
        return "n/a"
    if abs(seed_pct) < flat or abs(lab_pct) < flat:
        return "flat"
    return "same" if (seed_pct > 0) == (lab_pct > 0) else "opposite"


def lab_steps(arms):
    """(baseline cell, immediate cell) of each kernel with both, baselines
    in LAB_BASELINES order."""
    parts = {collect.cell_parts(a): a for a in arms}
    return [(parts[(kernel, b)], cell) for (kernel, arm), cell in parts.items()
            if arm == LAB_TREATMENT for b in LAB_BASELINES if (kernel, b) in parts]


def beside_2011(table, seed, test):
    """Rows (test, label, unit, seed_baseline, seed_baseline_value,
    seed_kernel, seed_value, seed_pct, baseline, baseline_mean, arm, mean,
    lab_pct, direction) per row of stats.writeback_cp's table that the
    transcription has (for any test: rows the mail gives only elsewhere
    are n/a here) and per lab step (lab_steps); none without a step."""
    figures = seed[seed["test"] == test].set_index(["label", "kernel"])["value"]
    means = table.set_index(["label", "arm"])["mean"]
    known = set(seed["label"])
    rows = []
    for label, unit in dict.fromkeys(zip(table["label"], table["unit"])):
        if label not in known:
            continue
        old, new = (figures.get((label, k), math.nan) for k in SEED_STEP)
        seed_pct = change_pct(old, new)
        for base, arm in lab_steps(list(dict.fromkeys(table["arm"]))):
            before, after = means[(label, base)], means[(label, arm)]
            lab_pct = change_pct(before, after)
            rows.append({"test": test, "label": label, "unit": unit,
                         "seed_baseline": SEED_STEP[0], "seed_baseline_value": old,
                         "seed_kernel": SEED_STEP[1], "seed_value": new, "seed_pct": seed_pct,
                         "baseline": base, "baseline_mean": before, "arm": arm,
                         "mean": after, "lab_pct": lab_pct,
                         "direction": direction(seed_pct, lab_pct)})
    return pd.DataFrame(rows, columns=BESIDE_2011_COLUMNS)


def proactive(calls, arms):
    """A row per arm of the memory.reclaim calls (collect.Dataset.proactive
    of one scenario), all runs pooled: how many, how many the kernel
    refused (result other than "ok": EAGAIN when it reclaimed less than
    asked), time per call, pages scanned and reclaimed per call and the
    efficiency of the pooled totals."""
    rows = []
    for arm in arms_with_data(calls, arms):
        c = calls[calls["arm"] == arm]
        ms = c["duration_ns"].to_numpy(dtype=float) / 1e6
        ok = int((c["result"] == "ok").sum())
        rows.append({"arm": arm, "runs": c["run"].nunique(), "calls": len(c), "ok": ok,
                     "failed": len(c) - ok, "mean_ms": float(ms.mean()),
                     "p50_ms": float(np.percentile(ms, 50)), "max_ms": float(ms.max()),
                     "scanned_per_call": float(c["pgscan"].mean()),
                     "reclaimed_per_call": float(c["pgsteal"].mean()),
                     "efficiency_pct": _ratio(float(c["pgsteal"].sum()),
                                              float(c["pgscan"].sum()), 100)})
    return pd.DataFrame(rows, columns=["arm", "runs", "calls", "ok", "failed", "mean_ms",
                                       "p50_ms", "max_ms", "scanned_per_call",
                                       "reclaimed_per_call", "efficiency_pct"])


# A scenario's floor: the scenario that holds the same footprint where no
# reclaim policy can act (scenarios/pinned-floor.scenario), against which
# a neighbour's cost is excess.
FLOORS = {"dirty-neighbour": "pinned-floor"}
# The headline's two costs, each per MiB of the neighbour's work.
HEADLINE = [("CPU", "nb_sys_ms_per_mib"), ("stall", "nb_reclaim_ms_per_mib")]


def _values(metric_table, arm, metric):
    sel = metric_table[(metric_table["arm"] == arm) & (metric_table["metric"] == metric)]
    return sel["value"].to_numpy(dtype=float)


def _reduction(arm, base, floor):
    """1 - excess(arm) / excess(baseline), excess being the mean over the
    floor's mean; None when the baseline has no excess."""
    excess_base = base.mean() - floor.mean()
    if excess_base <= 0:
        return None
    return 1 - (arm.mean() - floor.mean()) / excess_base


def headline(metric_table, floor_table, arms, baseline, resamples=4000, seed=1):
    """Rows (cost, metric, arm, runs, mean, floor_runs, floor_mean, excess,
    reduction, ci_low, ci_high): each arm's excess over the floor's mean
    and 1 - excess(arm) / excess(baseline), with a 95 % bootstrap
    interval (runs of the arm, the baseline and the floor resampled
    independently, seeded: the same runs give the same interval).  The
    floor's runs of any arm count: it has no writeback for a policy to
    act on.  No interval with fewer than two runs in a group."""
    rng = np.random.default_rng(seed)
    rows = []
    for cost, metric in HEADLINE:
        floor = floor_table[floor_table["metric"] == metric]["value"].to_numpy(dtype=float)
        base = _values(metric_table, baseline, metric)
        for arm in arms:
            a = _values(metric_table, arm, metric)
            if not len(a) or not len(floor) or not len(base):
                continue
            row = {"cost": cost, "metric": metric, "arm": arm, "runs": len(a),
                   "mean": a.mean(), "floor_runs": len(floor), "floor_mean": floor.mean(),
                   "excess": a.mean() - floor.mean(),
                   "reduction": _reduction(a, base, floor), "ci_low": None, "ci_high": None}
            if min(len(a), len(base), len(floor)) >= 2 and row["reduction"] is not None:
                boot = []
                for _ in range(resamples):
                    # the baseline against itself is one sample, not two
                    ra = rng.choice(a, len(a))
                    rb = ra if arm == baseline else rng.choice(base, len(base))
                    r = _reduction(ra, rb, rng.choice(floor, len(floor)))
                    if r is not None:
                        boot.append(r)
                if boot:
                    row["ci_low"], row["ci_high"] = (float(np.percentile(boot, 2.5)),
                                                     float(np.percentile(boot, 97.5)))
            rows.append(row)
    return pd.DataFrame(rows, columns=["cost", "metric", "arm", "runs", "mean", "floor_runs",
                                       "floor_mean", "excess", "reduction", "ci_low", "ci_high"])


def probe_excess(probe, floor_probe, arms, quantiles=(50, 99)):
    """Rows (arm, quantile, bursts, ms, floor_bursts, floor_ms,
    excess_ms): the neighbour's probe fault latency, bursts of all runs
    of an arm pooled, against the floor's pooled bursts."""
    rows = []
    floor = floor_probe["latency_us"].to_numpy(dtype=float) / 1e3
    if not len(floor):
        return pd.DataFrame(columns=["arm", "quantile", "bursts", "ms", "floor_bursts",
                                     "floor_ms", "excess_ms"])
    for arm in arms:
        lat = probe[probe["arm"] == arm]["latency_us"].to_numpy(dtype=float) / 1e3
        if not len(lat):
            continue
        for q in quantiles:
            a, f = float(np.percentile(lat, q)), float(np.percentile(floor, q))
            rows.append({"arm": arm, "quantile": f"p{q}", "bursts": len(lat), "ms": a,
                         "floor_bursts": len(floor), "floor_ms": f, "excess_ms": a - f})
    return pd.DataFrame(rows, columns=["arm", "quantile", "bursts", "ms", "floor_bursts",
                                       "floor_ms", "excess_ms"])


# (metric, test, what it says): every valid run of an arm must pass.
GUARDS = [("slice_oom_kills", lambda v: v == 0, "no OOM kill under the parent"),
          ("run_oom_kills", lambda v: v == 0, "no OOM kill in the whole run"),
          ("dirtier_of_stick_pct", lambda v: v >= 95, "the stick writes >= 0.95x its rate")]


def guards(metric_table, arms):
    """Rows (arm, guard, runs, failed, worst): how many valid runs of each
    arm break each guard of the headline."""
    rows = []
    for arm in arms:
        for metric, ok, what in GUARDS:
            v = _values(metric_table, arm, metric)
            if not len(v):
                continue
            bad = [x for x in v if not ok(x)]
            # The worst run is the one furthest the wrong way.
            worst = max(v) if mx.BY_NAME[metric].better == "lower" else min(v)
            rows.append({"arm": arm, "guard": what, "runs": len(v), "failed": len(bad),
                         "worst": float(worst)})
    return pd.DataFrame(rows, columns=["arm", "guard", "runs", "failed", "worst"])
