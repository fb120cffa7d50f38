"""Cover-letter figures, each written as PNG and SVG.

Every function takes tidy tables (or one load.Run) and a path stem and
returns the files written.  Arms keep one colour in every figure.
"""
import matplotlib

matplotlib.use("Agg")  # headless: make report runs without a display
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from memcg_lab import arms_table, load  # noqa: E402

# A known arm's colour is fixed (the arms table's) so that a figure's
# colours do not depend on which arms happen to be in it.
SPARE = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
MIB = 1 << 20


def arm_colour(cell):
    """The colour of an arm, or of a cell "kernel:arm" of a report with
    several kernels: the lab kernel's cell takes its arm's colour, another
    kernel's a darker or lighter shade of it (by the kernel's name), so
    that no cell takes another arm's colour; an arm the table does not
    know, a spare one."""
    kernel, _, arm = cell.rpartition(":")
    if arm not in arms_table.COLOURS:
        return SPARE[sum(map(ord, cell)) % len(SPARE)]
    base = arms_table.COLOURS[arm]
    if not kernel or kernel == load.DEFAULT_KERNEL:
        return base
    rgb = np.array(matplotlib.colors.to_rgb(base))
    shade = rgb * 0.55 if sum(map(ord, kernel)) % 2 else rgb + (1 - rgb) * 0.5
    return matplotlib.colors.to_hex(shade)


def legend(ax, **kw):
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **kw)


def save(fig, stem):
    files = []
    for ext in ("png", "svg"):
        path = f"{stem}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        files.append(path)
    plt.close(fig)
    return files


def rate(series):
    """Per-second increase of a counter Series indexed by time_s."""
    dt = np.diff(series.index.to_numpy(dtype=float))
    dv = np.diff(series.to_numpy(dtype=float))
    return series.index.to_numpy()[1:], np.divide(dv, dt, out=np.zeros_like(dv), where=dt > 0)


def shade_phases(ax, phases, t0):
    for i, p in enumerate(phases.itertuples()):
        ax.axvspan(p.start_s - t0, p.end_s - t0, color="0.9" if i % 2 else "0.95", zorder=0)
        ax.text(p.start_s - t0, 1.0, p.phase, transform=ax.get_xaxis_transform(),
                fontsize=7, va="bottom", color="0.4")


def timeseries(r, stem):
    """One run: the dirtier's file LRU, scan/steal rates and the
    neighbour's PSI, time relative to the measured phase's start."""
    phases = r.phases()
    _, t0, _ = r.measured_phase()
    cgroups = r.cgroups()
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax = axes[0]
    # "immediate" is the series' LRU_IMMEDIATE list (parked folios under
    # writeback): drawn wherever the kernel has it, or the reader cannot
    # see where the file pages went under the immediate arm.
    for key, style in [("inactive_file", "-"), ("active_file", "--"), ("immediate", "-"),
                       ("file_dirty", ":"), ("file_writeback", "-.")]:
        s = r.series(cgroups.dirtier, "memory.stat." + key)
        if len(s):
            ax.plot(s.index - t0, s.to_numpy() / MIB, style, label=key,
                    lw=2.5 if key == "immediate" else None)
    ax.set_ylabel("dirtier memory.stat (MiB)")
    legend(ax, loc="upper right")
    ax = axes[1]
    # The parent is drawn wide and pale: when only the dirtier reclaims,
    # its lines lie exactly on the parent's.
    for cg, name, lw in [(cgroups.parent, "parent", 4), (cgroups.dirtier, "dirtier", 1.2),
                         (cgroups.neighbour, "neighbour", 1.2)]:
        for key, style in [("pgscan", "-"), ("pgsteal", "--")]:
            s = r.series(cg, "memory.stat." + key)
            if len(s) > 1:
                t, v = rate(s)
                ax.plot(t - t0, v, style, lw=lw, alpha=0.4 if lw > 2 else 1,
                        label=f"{name} {key}")
    ax.set_ylabel("reclaim rate (pages/s)")
    ax.set_yscale("symlog", linthresh=100)
    legend(ax, loc="upper right", ncol=3)
    ax = axes[2]
    for kind, style in [("some", "-"), ("full", "--")]:
        s = r.series(cgroups.neighbour, f"memory.pressure.{kind}.total")
        if len(s) > 1:
            t, v = rate(s)
            # usec stalled per second of wall time, as a share
            ax.plot(t - t0, v / 1e4, style, color=arm_colour(r.arm), label=f"PSI {kind}")
    ax.set_ylabel("neighbour memory PSI (% of time)")
    ax.set_xlabel("time since the measured phase began (s)")
    legend(ax, loc="upper right")
    for ax in axes:
        shade_phases(ax, phases, t0)
    fig.suptitle(f"{r.scenario} / {r.arm}: {r.name}", fontsize=10)
    return save(fig, stem)


def psi_overlay(runs, stem):
    """The neighbour's PSI some over the measured phase, one run per arm
    (runs: {arm: load.Run}), on one axis."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for arm, r in runs.items():
        _, t0, t1 = r.measured_phase()
        s = r.series(r.cgroups().neighbour, "memory.pressure.some.total")
        s = s[(s.index >= t0) & (s.index <= t1)]
        if len(s) > 1:
            t, v = rate(s)
            ax.plot(t - t0, v / 1e4, color=arm_colour(arm), label=f"{arm} ({r.name})")
    ax.set_xlabel("time since the measured phase began (s)")
    ax.set_ylabel("neighbour memory PSI some (% of time)")
    legend(ax, loc="upper right")
    ax.grid(alpha=0.3)
    return save(fig, stem)


def boxplots(metric_table, arms, names, stem):
    """Per-arm box plots of per-run values of the given metrics, with the
    runs drawn on top (a box of three runs hides too much on its own)."""
    from memcg_lab.metrics import BY_NAME
    names = [n for n in names if (metric_table["metric"] == n).any()]
    if not names:
        return []
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        m = BY_NAME[name]
        sel = metric_table[metric_table["metric"] == name]
        data = [sel[sel["arm"] == a]["value"].to_numpy() for a in arms]
        box = ax.boxplot(data, patch_artist=True, widths=0.5,
                         medianprops={"color": "black"})
        for patch, arm in zip(box["boxes"], arms):
            patch.set_facecolor(arm_colour(arm))
            patch.set_alpha(0.35)
        for i, (vals, arm) in enumerate(zip(data, arms), start=1):
            ax.plot(np.full(len(vals), i), vals, "o", color=arm_colour(arm), ms=4)
        # Cells "kernel:arm" are long: slanted, five of them fit.
        long = any(":" in a for a in arms)
        ax.set_xticks(range(1, len(arms) + 1), [f"{a}\n({len(v)} runs)" for a, v in zip(arms, data)],
                      rotation=30 if long else 0, ha="right" if long else "center", fontsize=8)
        ax.set_ylabel(f"{m.label} ({m.unit})")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    return save(fig, stem)


def latency_cdf(probe, arms, stem):
    """Empirical CDF of the neighbour's probe latency, all bursts of an
    arm pooled."""
    if probe.empty:
        return []
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in arms:
        lat = np.sort(probe[probe["arm"] == arm]["latency_us"].to_numpy(dtype=float)) / 1e3
        if len(lat):
            # from (first, 0) so the curve starts on the axis
            ax.step(np.r_[lat[0], lat], np.r_[0, np.arange(1, len(lat) + 1) / len(lat)],
                    where="post",
                    color=arm_colour(arm), label=f"{arm} (n={len(lat)})")
    ax.set_xscale("log")
    ax.set_xlabel(f"neighbour fault latency per {'burst'} (ms)")
    ax.set_ylabel("fraction of bursts")
    ax.set_ylim(0, 1.02)
    legend(ax)
    ax.grid(alpha=0.3)
    return save(fig, stem)


def human_us(us):
    """A duration in microseconds as a short label: 512us, 1.02ms, 4.19s."""
    if us < 1000:
        return f"{us:g}us"
    return f"{us / 1e3:.3g}ms" if us < 1e6 else f"{us / 1e6:.3g}s"


def latency_histogram(table, stem):
    """The probe's log2 latency buckets (stats.pooled_histogram), share of
    each arm's bursts, arms side by side."""
    if table.empty:
        return []
    arms = list(dict.fromkeys(table["arm"]))
    buckets = list(dict.fromkeys(zip(table["bucket_lo_us"], table["bucket_hi_us"])))
    x = np.arange(len(buckets))
    width = 0.8 / len(arms)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(buckets)), 4))
    for i, arm in enumerate(arms):
        sel = table[table["arm"] == arm]
        ax.bar(x + (i - (len(arms) - 1) / 2) * width, sel["share_pct"], width,
               color=arm_colour(arm), label=f"{arm} (n={int(sel['count'].sum())})")
    ax.set_xticks(x, [f"[{human_us(lo)}, {human_us(hi)})" for lo, hi in buckets],
                  rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("neighbour fault latency per burst (log2 buckets)")
    ax.set_ylabel("% of bursts")
    legend(ax)
    ax.grid(alpha=0.3, axis="y")
    return save(fig, stem)


def clat_percentiles(fio, arms, stem, job="neighbour-read", direction="read", bins=None):
    """fio completion latency per arm: the CDF of its json+ histograms
    pooled over the arm's runs where every run has them, otherwise the
    few percentiles fio reported, as points, one line per run."""
    sel = fio[(fio["job"] == job) & (fio["direction"] == direction)
              & fio["stat"].str.match(r"^p[0-9.]+$")]
    if sel.empty:
        return []
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in arms:
        runs = set(sel[sel["arm"] == arm]["run"])
        b = None if bins is None else bins[(bins["arm"] == arm) & (bins["job"] == job)
                                           & (bins["direction"] == direction)]
        if runs and b is not None and runs <= set(b["run"]):
            pooled = b.groupby("lat_us")["count"].sum().sort_index()
            cdf = pooled.cumsum() / pooled.sum()
            ax.step(pooled.index.to_numpy() / 1e3, cdf.to_numpy(), where="post",
                    color=arm_colour(arm), label=f"{arm} ({len(runs)} runs pooled)")
            continue
        for i, (_, f) in enumerate(sel[sel["arm"] == arm].groupby("run")):
            q = f["stat"].str[1:].astype(float).to_numpy()
            order = np.argsort(q)
            ax.plot(f["value_us"].to_numpy()[order] / 1e3, q[order] / 100, "o-",
                    color=arm_colour(arm), alpha=0.8, label=arm if i == 0 else None)
    ax.set_xscale("log")
    ax.set_xlabel(f"fio {job} {direction} completion latency (ms)")
    ax.set_ylabel("fraction of reads (percentile / 100)")
    legend(ax)
    ax.grid(alpha=0.3)
    return save(fig, stem)


def heatmap_norm(values):
    """A log colour scale over the positive values (None if there are
    none): the dirtier's lruvec holds 100x the scans of any other cell,
    and a linear scale hides the neighbour's own lruvec."""
    positive = values[values > 0]
    if not positive.size:
        return None
    return matplotlib.colors.LogNorm(vmin=max(positive.min(), 1),
                                     vmax=max(positive.max(), 10))


def attribution_heatmap(attribution, arm, stem):
    """Who scanned whose pages: nr_scanned summed over an arm's runs,
    reclaimer cgroup by row, owner of the scanned pages by column."""
    sel = attribution[attribution["arm"] == arm]
    if sel.empty:
        return []
    m = sel.pivot_table(index="reclaimer_cgroup", columns="scanned_cgroup",
                        values="nr_scanned", aggfunc="sum", fill_value=0)
    fig, ax = plt.subplots(figsize=(1.5 + 1.2 * m.shape[1], 1.2 + 0.6 * m.shape[0]))
    values = m.to_numpy(dtype=float)
    im = ax.imshow(np.where(values > 0, values, np.nan), cmap="viridis", aspect="auto",
                   norm=heatmap_norm(values))
    ax.set_xticks(range(m.shape[1]), m.columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(m.shape[0]), m.index, fontsize=8)
    for (i, j), v in np.ndenumerate(m.to_numpy()):
        ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7, color="w")
    ax.set_xlabel("cgroup owning the scanned pages")
    ax.set_ylabel("reclaiming cgroup")
    fig.colorbar(im, ax=ax, label="pages scanned (log)")
    ax.set_title(f"{arm}: reclaim attribution (blank: none)", fontsize=10)
    return save(fig, stem)
