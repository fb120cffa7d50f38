"""Per-run numbers over the measured phase, as one row per run.

Counter deltas come from run.summarise() so a report and a run's
summary.json never disagree; the rest is arithmetic on them.  Each
metric says whether lower or higher is better, which fixes the sign of
the comparison's % difference (positive = better, as in mmtests).
"""
from collections import namedtuple

from memcg_lab import run

Metric = namedtuple("Metric", "name label unit better")

# The length of one sleep of a writer over its memcg's dirty limit
# (patch 16's MEMCG_DIRTY_PAUSE, HZ / 10): vmstat counts the sleeps.
MEMCG_DIRTY_SLEEP_S = 0.1

METRICS = [
    Metric("nb_psi_some_s", "Neighbour PSI some", "s", "lower"),
    Metric("nb_psi_some_pct", "Neighbour PSI some share", "% of phase", "lower"),
    Metric("nb_psi_some_probe_pct", "Neighbour PSI some while probing", "% of time", "lower"),
    Metric("nb_system_probe_pct", "Neighbour system CPU while probing", "% of a CPU", "lower"),
    Metric("nb_psi_full_s", "Neighbour PSI full", "s", "lower"),
    Metric("nb_system_s", "Neighbour system CPU", "s", "lower"),
    Metric("nb_user_s", "Neighbour user CPU", "s", "lower"),
    # Not comparable between MGLRU and the classic LRU (run.COUNTERS):
    # major faults are.
    Metric("nb_refault_file", "Neighbour file refaults", "pages", "lower"),
    Metric("nb_pgmajfault", "Neighbour major faults", "count", "lower"),
    Metric("probe_bursts", "Probe bursts completed", "count", "higher"),
    Metric("probe_mean_ms", "Probe fault latency mean", "ms", "lower"),
    Metric("nb_read_MiBps", "Neighbour read bandwidth", "MiB/s", "higher"),
    Metric("nb_clat_mean_ms", "Neighbour read clat mean", "ms", "lower"),
    Metric("dirtier_write_MiBps", "Dirtier write bandwidth", "MiB/s", "higher"),
    Metric("dirtier_pgscan", "Dirtier pages scanned", "pages", "lower"),
    Metric("dirtier_efficiency_pct", "Dirtier reclaim efficiency", "%", "higher"),
    Metric("slice_scan_velocity", "Parent scan velocity", "pages/s", "lower"),
    Metric("slice_efficiency_pct", "Parent reclaim efficiency", "%", "higher"),
    Metric("slice_events_max", "Parent memory.events max", "count", "lower"),
    # Every task's sleeps in reclaim_throttle() (reclaim-throttle.csv):
    # the time reclaim waits instead of scanning.
    Metric("throttled_s", "Reclaim throttled, all tasks", "s", "lower"),
    Metric("throttled_writeback_s", "Reclaim throttled on writeback, all tasks", "s", "lower"),
    Metric("throttled_congested_s", "Reclaim throttled on congestion, all tasks", "s", "lower"),
    # Series v2's wait for parked writeback before an OOM, and whose
    # tasks it lands on: the dirtier's or the neighbour's.
    Metric("throttled_parked_s", "Reclaim waited for parked writeback, all tasks", "s", "lower"),
    Metric("dirtier_throttled_parked_s", "Dirtier waited for parked writeback", "s", "lower"),
    Metric("nb_throttled_parked_s", "Neighbour waited for parked writeback", "s", "lower"),
    # Series v4 (patch 16): the writer waits at the source instead, in
    # 100 ms sleeps over its memcg's dirty limit (vmstat
    # dirty_throttle_memcg; the dirtier is the only writer).
    Metric("memcg_dirty_sleep_s", "Writers slept over their memcg's dirty limit", "s", "lower"),
    # Per unit of the neighbour's work (MiB its reader read in the phase
    # plus MiB its probe faulted in bursts begun in it): the runs of
    # different arms do different amounts.
    Metric("nb_work_mib", "Neighbour work (read + faulted)", "MiB", "higher"),
    Metric("nb_sys_ms_per_mib", "Neighbour system CPU per MiB of work", "ms/MiB", "lower"),
    # Its time in reclaim passes (lab-reclaim-attrib), throttle sleeps
    # inside them included, and those sleeps alone.
    Metric("nb_reclaim_s", "Neighbour time in reclaim passes", "s", "lower"),
    Metric("nb_reclaim_ms_per_mib", "Neighbour reclaim time per MiB of work", "ms/MiB", "lower"),
    Metric("nb_throttled_s", "Neighbour throttled in reclaim", "s", "lower"),
    # Guards of the headline (report.py): none may be broken.
    Metric("slice_oom_kills", "OOM kills under the parent", "count", "lower"),
    Metric("run_oom_kills", "OOM kills in the whole run, the writer's stop included",
           "count", "lower"),
    # What the stick wrote in the phase (vmstat nr_written) over its
    # throttle: fio's own bandwidth counts the page cache it filled first.
    Metric("dirtier_of_stick_pct", "Stick writes in the phase of its rate", "%", "higher"),
    # The device's completion pattern (run.writeback_stalls): arms that
    # differ here differ in what the stick did, not only in reclaim.
    Metric("stick_stall_max_s", "Longest stick stall, writeback pending", "s", "lower"),
    # Writeback that vfat completes at once: the neighbour's probe waits
    # for the next burst (RESULTS.md).
    Metric("stick_burst_period_s", "Writeback completion bursts, period", "s", "lower"),
    Metric("stick_burst_pages", "Writeback completion bursts, median size", "pages", "lower"),
    # System-wide: the only scan counts a cgroup v1 run has.
    Metric("vm_pgscan_file", "System file pages scanned", "pages", "lower"),
    Metric("vm_efficiency_pct", "System file reclaim efficiency", "%", "higher"),
    # Global reclaim (dirty-global): kswapd's scans against the
    # allocating tasks' direct reclaim (review finding 5).
    Metric("vm_pgscan_kswapd", "kswapd pages scanned", "pages", "lower"),
    Metric("vm_pgscan_direct", "Global direct reclaim pages scanned", "pages", "lower"),
    Metric("vm_allocstall", "Global direct reclaim entries (allocstall)", "count", "lower"),
]
ALLOCSTALL_KEYS = ["vmstat.allocstall_" + z for z in ("dma", "dma32", "normal", "movable")]
BY_NAME = {m.name: m for m in METRICS}


def _delayed_s(table, key):
    """Seconds slept under key of a reclaim_throttle table, None without
    the table."""
    return None if table is None else table.get(key, {}).get("delayed_s", 0.0)


def _sum_known(values):
    """The sum of the values that are not None, None if all are."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ratio(a, b, scale=1.0):
    if a is None or not b:
        return None
    return a / b * scale


def run_metrics(summary, fio, probe, cgroups):
    """{metric name: value or None} for one run.  fio is load.Run.fio(),
    probe load.Run.probe_latencies(), cgroups load.Run.cgroups() (the
    dirtier's counters are those of a run with one dirtier: dirty-many's
    runs have none, as before cgroups.csv)."""
    c = summary["counters"]
    phase_s = summary["phase_s"]
    nb, dt, sl = cgroups.neighbour, cgroups.dirtier, cgroups.parent

    mode = summary.get("cgroup_mode", "v2")

    def counter(cg, key, scale=1.0):
        """cg's counter in the summary ("-": /proc/vmstat), None for a
        run without cg or the key."""
        v = None if cg is None else c.get(f"{cg}:{run.actual_key(mode, key)}")
        return None if v is None else v * scale

    def fio_stat(job, direction, stat):
        sel = fio[(fio["job"] == job) & (fio["direction"] == direction) & (fio["stat"] == stat)]
        return float(sel["value_us"].iloc[0]) if len(sel) else None

    some_us = counter(nb, "memory.pressure.some.total")
    read_bw = fio_stat("neighbour-read", "read", "bw_KiBps")
    write_bw = fio_stat("dirtier", "write", "bw_KiBps")
    clat = fio_stat("neighbour-read", "read", "mean")
    lat = probe["latency_us"] if len(probe) else None
    throttle = summary.get("reclaim_throttle")
    by_reason = throttle["by_reason"] if isinstance(throttle, dict) else None
    # Empty cgroup tables: a file from before the cgroup column.
    by_cgroup = (throttle.get("by_cgroup") or None) if isinstance(throttle, dict) else None
    by_reason_cgroup = ((throttle.get("by_reason_cgroup") or None)
                        if isinstance(throttle, dict) else None)
    # The reader's MiB in the phase; runs from before neighbour-io.txt
    # have only fio's total, which counts the tail's reads too.
    read_mib = summary.get("neighbour_read_mib", fio_stat("neighbour-read", "read", "io_MiB"))
    probe_mb = summary.get("probe_mb")
    work = None
    if read_mib is not None and probe_mb and lat is not None:
        work = read_mib + len(lat) * probe_mb
    nb_sys = counter(nb, "cpu.stat.system_usec", 1e-6)
    passes = summary.get("reclaim_passes")
    nb_reclaim = None if passes is None else passes.get(nb, {}).get("s", 0.0)
    stick = summary.get("stick_write_bps")
    stalls = summary.get("writeback_stalls") or {}
    return {
        "nb_work_mib": work,
        "nb_sys_ms_per_mib": _ratio(nb_sys, work, 1e3),
        "nb_reclaim_s": nb_reclaim,
        "nb_reclaim_ms_per_mib": _ratio(nb_reclaim, work, 1e3),
        "nb_throttled_s": _delayed_s(by_cgroup, nb),
        "slice_oom_kills": counter(sl, "memory.events.oom_kill"),
        "run_oom_kills": summary.get("run_oom_kills"),
        "dirtier_of_stick_pct": _ratio(counter("-", "vmstat.nr_written", 4096),
                                       stick * phase_s if stick else None, 100),
        "stick_stall_max_s": stalls.get("max_s"),
        "stick_burst_period_s": stalls.get("burst_period_s"),
        "stick_burst_pages": stalls.get("burst_pages_median"),
        "throttled_s": None if by_reason is None else
        sum(t["delayed_s"] for t in by_reason.values()),
        "throttled_writeback_s": _delayed_s(by_reason, "writeback"),
        "throttled_congested_s": _delayed_s(by_reason, "congested"),
        "throttled_parked_s": _delayed_s(by_reason, "parked"),
        "dirtier_throttled_parked_s": _delayed_s(by_reason_cgroup, f"parked:{dt}"),
        "nb_throttled_parked_s": _delayed_s(by_reason_cgroup, f"parked:{nb}"),
        "memcg_dirty_sleep_s": counter("-", "vmstat.dirty_throttle_memcg",
                                       MEMCG_DIRTY_SLEEP_S),
        "nb_psi_some_s": None if some_us is None else some_us / 1e6,
        "nb_psi_some_pct": _ratio(some_us, phase_s * 1e6, 100),
        "nb_psi_full_s": counter(nb, "memory.pressure.full.total", 1e-6),
        "nb_system_s": nb_sys,
        "nb_user_s": counter(nb, "cpu.stat.user_usec", 1e-6),
        "nb_refault_file": counter(nb, "memory.stat.workingset_refault_file"),
        "nb_pgmajfault": counter(nb, "memory.stat.pgmajfault"),
        "probe_bursts": None if lat is None else float(len(lat)),
        "probe_mean_ms": None if lat is None else float(lat.mean()) / 1e3,
        "nb_read_MiBps": None if read_bw is None else read_bw / 1024,
        "nb_clat_mean_ms": None if clat is None else clat / 1e3,
        "dirtier_write_MiBps": None if write_bw is None else write_bw / 1024,
        "dirtier_pgscan": counter(dt, "memory.stat.pgscan"),
        "dirtier_efficiency_pct": _ratio(counter(dt, "memory.stat.pgsteal"),
                                         counter(dt, "memory.stat.pgscan"), 100),
        "slice_scan_velocity": _ratio(counter(sl, "memory.stat.pgscan"), phase_s),
        "slice_efficiency_pct": _ratio(counter(sl, "memory.stat.pgsteal"),
                                       counter(sl, "memory.stat.pgscan"), 100),
        "slice_events_max": counter(sl, "memory.events.max"),
        "vm_pgscan_kswapd": counter("-", "vmstat.pgscan_kswapd"),
        "vm_pgscan_direct": counter("-", "vmstat.pgscan_direct"),
        "vm_allocstall": _sum_known(counter("-", k) for k in ALLOCSTALL_KEYS),
        "vm_pgscan_file": counter("-", "vmstat.pgscan_file"),
        "vm_efficiency_pct": _ratio(counter("-", "vmstat.pgsteal_file"),
                                    counter("-", "vmstat.pgscan_file"), 100),
    }


def probe_window(probe):
    """[first burst start, last burst end] in s, or None without bursts."""
    if not len(probe):
        return None
    return (float(probe["start_s"].min()),
            float((probe["start_s"] + probe["latency_us"] / 1e6).max()))


def share_in_window(series, window):
    """Increase of a usec counter per usec of time between the first and
    last sample inside window, in %; None without two samples."""
    if window is None:
        return None
    inside = series[(series.index >= window[0]) & (series.index <= window[1])]
    if len(inside) < 2 or inside.index[-1] == inside.index[0]:
        return None
    return float(inside.iloc[-1] - inside.iloc[0]) / (
        (inside.index[-1] - inside.index[0]) * 1e6) * 100


def window_metrics(series, probe, cgroups):
    """The neighbour's cost while its probe ran: the measured phase also
    covers whatever the neighbour's scope does after its workload ends
    (see analysis/README.md).  series(cgroup, key) is load.Run.series,
    cgroups load.Run.cgroups()."""
    w = probe_window(probe)
    nb = cgroups.neighbour
    return {
        "nb_psi_some_probe_pct": share_in_window(series(nb, "memory.pressure.some.total"), w),
        "nb_system_probe_pct": share_in_window(series(nb, "cpu.stat.system_usec"), w),
    }


def improvement_pct(base, new, better):
    """mmtests' % difference: positive when new is better than base."""
    if base is None or new is None:
        return None
    if base == 0:
        return 0.0 if new == 0 else None
    change = (new - base) / abs(base) * 100
    # + 0.0 turns -0.0 into 0.0, which prints without a sign.
    return (-change if better == "lower" else change) + 0.0
