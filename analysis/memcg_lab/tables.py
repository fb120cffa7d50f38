"""The comparison and percentile tables as cover-letter text (mmtests'
compare-kernels layout) and Markdown; CSV is the tidy frame itself."""
import math

from memcg_lab import stats

LEGEND = ("% is the difference to the baseline arm, positive = better "
          "(lower cost or higher throughput);\n"
          "*  x%* marks Welch's t-test p < 0.05, (  x%) not significant; "
          "'Signif' gives p and whether the runs' [min, max] ranges overlap.")
ROWS = [("Amean", "mean", "pct_mean"), ("Stddev", "stddev", "pct_stddev"),
        ("CoeffVar", "coeffvar", "pct_coeffvar"), ("Min", "min", None), ("Max", "max", None)]


def num(v, width=10):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"{'n/a':>{width}}"
    a = abs(v)
    fmt = ".2f" if a < 1e5 else ".0f"
    return f"{v:{width}{fmt}}"


def pct(v, significant=False):
    if v is None or math.isnan(v):
        return "(    n/a )"
    s = f"{v:7.2f}%"
    return f"*{s}*" if significant else f"({s})"


def metric_title(r):
    return f"{r['label']} ({r['unit']})"


def compare_text(table, scenario):
    """mmtests layout: per metric an Amean row with each arm's mean and %
    difference, then Stddev, CoeffVar, Min, Max and significance."""
    if table.empty:
        return f"{scenario}: no valid runs to compare\n"
    arms = list(dict.fromkeys(table["arm"]))
    baseline = table["baseline"].iloc[0]
    width = max(len(metric_title(r)) for _, r in table.iterrows()) + 2
    # Wider for the long names of (kernel, arm) cells (pristine-6.1:immediate).
    cell = max([21] + [len(a) + 2 for a in arms])
    n = table.groupby("arm")["n"].max()
    lines = [f"{scenario}: baseline {baseline}", LEGEND, "",
             " " * (10 + width) + "".join(f"{a:>{cell}}" for a in arms),
             " " * (10 + width) + "".join(f"{f'({n[a]} runs)':>{cell}}" for a in arms)]
    for metric, rows in table.groupby("metric", sort=False):
        rows = rows.set_index("arm").loc[arms]
        title = metric_title(rows.iloc[0])
        for name, col, pcol in ROWS:
            cells = []
            for arm in arms:
                r = rows.loc[arm]
                c = num(r[col])
                if pcol:
                    sig = pcol == "pct_mean" and bool(r["significant"])
                    c += " " + pct(r[pcol], sig)
                cells.append(f"{c:>{cell}}")
            lines.append(f"{name:<10}{title:<{width}}" + "".join(cells))
        sig = []
        for arm in arms:
            r = rows.loc[arm]
            if arm == baseline or r["ranges_overlap"] is None:
                sig.append(f"{'':>{cell}}")
                continue
            p = "p=n/a" if math.isnan(r["welch_p"]) else f"p={r['welch_p']:.3f}"
            ov = "overlap" if r["ranges_overlap"] else "disjoint"
            sig.append(f"{p + ' ' + ov:>{cell}}")
        lines.append(f"{'Signif':<10}{title:<{width}}" + "".join(sig))
    return "\n".join(lines) + "\n"


def compare_markdown(table, scenario):
    if table.empty:
        return f"{scenario}: no valid runs to compare\n"
    arms = list(dict.fromkeys(table["arm"]))
    baseline = table["baseline"].iloc[0]
    head = "| metric | " + " | ".join(arms) + " |"
    lines = [f"**{scenario}**, baseline `{baseline}`: mean ± stddev (% difference, "
             "positive = better; **bold** = Welch p < 0.05; ∩ = ranges overlap, "
             "∅ = disjoint)", "", head, "|---" * (len(arms) + 1) + "|"]
    for metric, rows in table.groupby("metric", sort=False):
        rows = rows.set_index("arm").loc[arms]
        cells = []
        for arm in arms:
            r = rows.loc[arm]
            c = f"{num(r['mean'], 0)} ± {num(r['stddev'], 0)}"
            if arm != baseline:
                p = "n/a" if math.isnan(r["pct_mean"]) else f"{r['pct_mean']:+.2f}%"
                p = f"**{p}**" if r["significant"] else p
                ov = "" if r["ranges_overlap"] is None else (" ∩" if r["ranges_overlap"] else " ∅")
                c += f" ({p}{ov})"
            cells.append(c)
        lines.append(f"| {metric_title(rows.iloc[0])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PCOLS = ["p50", "p90", "p99", "max"]


def percentile_text(table):
    if table.empty:
        return "no latency data\n"
    w = max(len(s) for s in table["source"]) + 2
    aw = max([12] + [len(a) + 2 for a in table["arm"]])
    lines = ["latency percentiles (ms)",
             f"{'source':<{w}}{'arm':<{aw}}{'n':>6}" + "".join(f"{c:>12}" for c in PCOLS)]
    for _, r in table.iterrows():
        lines.append(f"{r['source']:<{w}}{r['arm']:<{aw}}{r['n']:>6}"
                     + "".join(num(r[c], 12) for c in PCOLS))
    return "\n".join(lines) + "\n"


def percentile_markdown(table):
    if table.empty:
        return "no latency data\n"
    lines = ["| source | arm | n | " + " | ".join(f"{c} (ms)" for c in PCOLS) + " |",
             "|---" * (3 + len(PCOLS)) + "|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['source']} | {r['arm']} | {r['n']} | "
                     + " | ".join(num(r[c], 0) for c in PCOLS) + " |")
    return "\n".join(lines) + "\n"


def grid_text(header, rows):
    """Columns padded to their widest cell: the first left-aligned (row
    names), the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = []
    for r in [header] + rows:
        cells = [f"{r[0]:<{widths[0]}}"] + [f"{c:>{w + 2}}" for c, w in zip(r[1:], widths[1:])]
        lines.append("".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def grid_markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(str(c).strip() for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def histogram_grid(table):
    """(header, rows) of stats.pooled_histogram: a row per bucket, per arm
    the bursts in it and their share."""
    arms = list(dict.fromkeys(table["arm"]))
    t = table.set_index(["bucket_lo_us", "bucket_hi_us", "arm"])
    buckets = list(dict.fromkeys(zip(table["bucket_lo_us"], table["bucket_hi_us"])))
    rows = [[f"[{lo}, {hi})"] + [f"{t.loc[(lo, hi, a), 'count']} ({t.loc[(lo, hi, a), 'share_pct']:.1f}%)"
                                 for a in arms] for lo, hi in buckets]
    rows.append(["bursts"] + [str(int(table[table["arm"] == a]["count"].sum())) for a in arms])
    return ["latency (us)"] + arms, rows


def histogram_text(table):
    if table.empty:
        return "no probe histogram\n"
    return ("probe fault latency histogram: bursts per log2 bucket, runs of an arm pooled\n"
            + grid_text(*histogram_grid(table)))


def histogram_markdown(table):
    if table.empty:
        return "no probe histogram\n"
    return ("Probe fault latency histogram (bursts per log2 bucket, runs of an arm pooled)\n\n"
            + grid_markdown(*histogram_grid(table)))


WRITEBACK_CP_LEGEND = (
    "mean over the alloc iterations of all runs of an arm; (x%) is the difference to the "
    "baseline arm, positive = better; +/- is the stddev (n-1) over iterations.\n"
    "vmstat: mean per iteration of the counters around each alloc; efficiency is reclaimed "
    "/ scanned, velocity pages scanned per second of alloc elapsed time.\n"
    "n/a: no run of the arm has the figure (a counter its kernel lacks, lab-alloc's "
    "'not available'), or for a ratio nothing to divide by.")


def writeback_cp_grids(table):
    """[(header, rows)] of stats.writeback_cp: the alloc block in the 2011
    cover letter's layout (mean (x%), then +/- stddev (x%)), then the
    vmstat block of means."""
    arms = list(dict.fromkeys(table["arm"]))
    t = table.set_index(["section", "label", "arm"])
    alloc = table[table["section"] == "alloc"]
    n = alloc.groupby("arm", sort=False)[["runs", "n"]].max()
    top = [[""] + [f"({n.loc[a, 'n']} iterations, {n.loc[a, 'runs']} runs)" for a in arms]]
    for label, unit in dict.fromkeys(zip(alloc["label"], alloc["unit"])):
        cells = [t.loc[("alloc", label, a)] for a in arms]
        top.append([f"{label} ({unit})"] + [f"{num(r['mean'], 0)} {pct(r['pct_mean'])}"
                                            for r in cells])
        top.append(["+/-"] + [f"{num(r['stddev'], 0)} {pct(r['pct_stddev'])}" for r in cells])
    vm = table[table["section"] == "vmstat"]
    bottom = [[f"{label} ({unit})"] + [num(t.loc[("vmstat", label, a), "mean"], 0) for a in arms]
              for label, unit in dict.fromkeys(zip(vm["label"], vm["unit"]))]
    return [([""] + arms, top), (["vmstat, mean per iteration"] + arms, bottom)]


def writeback_cp_text(table, scenario, beside=None):
    """beside: stats.beside_2011's rows, a third grid; None for a run
    without a 2011 counterpart."""
    if table.empty:
        return f"{scenario}: no writeback-cp.csv in the valid runs\n"
    grids = "\n".join(grid_text(*g) for g in writeback_cp_grids(table))
    return (f"{scenario}: the 2011 cover letter's table (writeback-cp.csv)\n"
            f"{WRITEBACK_CP_LEGEND}\n\n{grids}" + beside_2011_text(beside))


def writeback_cp_markdown(table, scenario, beside=None):
    if table.empty:
        return f"{scenario}: no writeback-cp.csv in the valid runs\n"
    grids = "\n".join(grid_markdown(*g) for g in writeback_cp_grids(table))
    return (f"**{scenario}**, the 2011 cover letter's table (`writeback-cp.csv`): "
            + WRITEBACK_CP_LEGEND.replace("\n", " ") + "\n\n" + grids
            + beside_2011_markdown(beside))


BESIDE_2011_LEGEND = (
    "The step that adds LRU_IMMEDIATE alone: in 2011 {seed_from} (patches 1-10) -> {seed_to} "
    "(1-11); in the lab each of {baselines} -> {treatment}, on one kernel.\n"
    "change: (new - old) / |old|, +inf% = up from 0.  direction: same = both changes have "
    "one sign; opposite = opposite signs; flat = either change is under {flat:g}% in size, "
    "no direction to compare; n/a = a figure is missing on a side (the mail gives none, a "
    "kernel lacks the counter).\n"
    "Compare directions, not values: 2011's alloc rows are means over 5 iterations, its "
    "vmstat rows totals over the whole test (copying included) and its velocities per second "
    "of the whole test; the lab's are means per alloc iteration, velocities per second of "
    "alloc.  why: by hand, for each '?' (analysis/README.md).")


def change(v):
    return "n/a" if math.isnan(v) else f"{v:+.1f}%"


def beside_2011_grid(beside):
    """(header, rows): per row the 2011 step's figures and change, the
    lab's arm means, per lab step its change and direction, and a 'why'
    left to write ('?')."""
    steps = list(dict.fromkeys(zip(beside["baseline"], beside["arm"])))
    arms = list(dict.fromkeys([b for b, _ in steps] + [a for _, a in steps]))
    first = beside.iloc[0]
    header = (["", first["seed_baseline"], first["seed_kernel"], "2011 change"] + arms
              + [h for b, a in steps for h in (f"{a} vs {b}", "direction")] + ["why"])
    rows = []
    for (label, unit), r in beside.groupby(["label", "unit"], sort=False):
        means = {**dict(zip(r["baseline"], r["baseline_mean"])), **dict(zip(r["arm"], r["mean"]))}
        by_step = r.set_index(["baseline", "arm"])
        row = r.iloc[0]
        rows.append([f"{label} ({unit})", num(row["seed_baseline_value"], 0),
                     num(row["seed_value"], 0), change(row["seed_pct"])]
                    + [num(means[a], 0) for a in arms]
                    + [c for s in steps for c in (change(by_step.loc[s, "lab_pct"]),
                                                  by_step.loc[s, "direction"])]
                    + ["" if (r["direction"] == "n/a").all() else "?"])
    return header, rows


def beside_2011_legend():
    return BESIDE_2011_LEGEND.format(
        seed_from=stats.SEED_STEP[0], seed_to=stats.SEED_STEP[1],
        baselines=" and ".join(stats.LAB_BASELINES), treatment=stats.LAB_TREATMENT,
        flat=stats.FLAT_PCT)


def beside_2011_title(beside):
    return (f"beside 2011: {beside['test'].iloc[0]} of the seed cover letter "
            "(analysis/memcg_lab/seed2011.csv)")


def beside_2011_text(beside):
    if beside is None:
        return ""
    if beside.empty:
        return f"\nbeside 2011: no grid, no {'/'.join(stats.LAB_BASELINES)} and " \
               f"{stats.LAB_TREATMENT} arms of one kernel\n"
    return (f"\n{beside_2011_title(beside)}\n{beside_2011_legend()}\n\n"
            + grid_text(*beside_2011_grid(beside)))


def beside_2011_markdown(beside):
    if beside is None:
        return ""
    if beside.empty:
        return beside_2011_text(beside)
    return (f"\n**{beside_2011_title(beside)}**: "
            + beside_2011_legend().replace("\n", " ") + "\n\n"
            + grid_markdown(*beside_2011_grid(beside)))


PROACTIVE_COLUMNS = [("runs", "runs", "d"), ("calls", "calls", "d"), ("ok", "ok", "d"),
                     ("failed", "failed", "d"), ("mean_ms", "mean (ms)", ".1f"),
                     ("p50_ms", "p50 (ms)", ".1f"), ("max_ms", "max (ms)", ".1f"),
                     ("scanned_per_call", "scanned/call", ".0f"),
                     ("reclaimed_per_call", "reclaimed/call", ".0f"),
                     ("efficiency_pct", "efficiency (%)", ".2f")]
PROACTIVE_LEGEND = ("memory.reclaim calls (proactive.csv), all runs of an arm pooled; failed: "
                    "the write returned an error (EAGAIN: less reclaimed than asked); "
                    "pages per call from the parent's memory.stat pgscan/pgsteal; "
                    "efficiency = reclaimed / scanned over all calls.")


def proactive_grid(table):
    header = ["arm"] + [title for _, title, _ in PROACTIVE_COLUMNS]
    rows = [[r["arm"]] + ["n/a" if isinstance(r[c], float) and math.isnan(r[c]) else f"{r[c]:{f}}"
                          for c, _, f in PROACTIVE_COLUMNS] for _, r in table.iterrows()]
    return header, rows


def proactive_text(table, scenario):
    if table.empty:
        return f"{scenario}: no proactive.csv in the valid runs\n"
    return f"{scenario}: {PROACTIVE_LEGEND}\n" + grid_text(*proactive_grid(table))


def proactive_markdown(table, scenario):
    if table.empty:
        return f"{scenario}: no proactive.csv in the valid runs\n"
    return f"**{scenario}**: {PROACTIVE_LEGEND}\n\n" + grid_markdown(*proactive_grid(table))
