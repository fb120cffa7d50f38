"""Finding run folders under a results tree and loading one into tidy
pandas tables.

A run folder is results/<scenario>/<UTC timestamp>-<kernel label>-<arm>[.N]/
as claimed by lab/run-scenario.sh; folders from before the kernel axis
are <UTC timestamp>-<arm>[.N].  Loading never judges a run; validate.py
does.
"""
import json
import math
import os
import re

import pandas as pd

from memcg_lab import arms_table, proactive, run, writeback_cp

# The arm is the name's last dash-separated part (arms have no dash);
# a kernel label may hold dashes and dots (pristine-6.1).
RUN_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)-(?:(?P<kernel>[A-Za-z0-9][A-Za-z0-9._-]*?)-)?"
                      r"(?P<arm>[A-Za-z0-9_]+)(?:\.(?P<n>\d+))?$")
# The label of runs that record none: before the kernel axis every run
# booted the series' build (lab/lib.sh DEFAULT_KERNEL_LABEL), or the
# debug one, which their kernel_flavour says.
DEFAULT_KERNEL = "lab"
ATTRIBUTION_COLUMNS = ["reclaimer_cgroup", "scanned_cgroup", "nr_scanned",
                       "nr_reclaimed", "reclaim_ns"]
HISTOGRAM_COLUMNS = ["bucket_lo_us", "bucket_hi_us", "count"]


def find_runs(results):
    """Run folders under results, sorted; report output is never a run."""
    found = []
    for dirpath, dirnames, _ in os.walk(results):
        dirnames[:] = sorted(d for d in dirnames if d != "report")
        for d in dirnames:
            if RUN_NAME.match(d):
                found.append(os.path.join(dirpath, d))
        # A run folder has no run folders inside it.
        dirnames[:] = [d for d in dirnames if not RUN_NAME.match(d)]
    return sorted(found)


def read_text(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read().strip()


# What fio writes to its output when a signal stops it, before the report.
FIO_TERMINATING = re.compile(r"fio: terminating on signal \d+")


def load_fio(path):
    """fio's JSON report; fio prints 'terminating on signal' lines ahead of
    the JSON when stopped with SIGINT, so parsing starts at the first '{'.
    None without the file, and when it holds those lines alone: fio was
    stopped and then killed before its report (the memcg OOM killer took
    a writer being stopped; load_run_oom_kills counts it)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read()
    start = text.find("{")
    if start < 0 and text.strip() and not FIO_TERMINATING.sub("", text).strip():
        return None
    if start < 0:
        raise run.RunError(f"{path}: no JSON object (fio killed before its report?)")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as e:
        raise run.RunError(f"{path}: broken fio JSON: {e}") from None


def fio_clat(report, job_file):
    """Rows (job, direction, stat, value_us) of completion latency: mean,
    max and the percentiles fio reported."""
    rows = []
    for job in report.get("jobs", []):
        for direction in ("read", "write"):
            d = job.get(direction, {})
            clat = d.get("clat_ns", {})
            if not d.get("total_ios") or not clat.get("N"):
                continue
            base = {"fio": job_file, "job": job["jobname"], "direction": direction}
            rows.append({**base, "stat": "mean", "value_us": clat["mean"] / 1e3})
            rows.append({**base, "stat": "max", "value_us": clat["max"] / 1e3})
            for q, v in clat.get("percentile", {}).items():
                rows.append({**base, "stat": f"p{float(q):g}", "value_us": v / 1e3})
            rows.append({**base, "stat": "bw_KiBps", "value_us": float(d["bw"])})
            if "io_bytes" in d:
                rows.append({**base, "stat": "io_MiB", "value_us": d["io_bytes"] / (1 << 20)})
    return rows


FIO_REPORTS = ("fio-dirtier.json", "fio-neighbour.json")
FIO_BIN_COLUMNS = ["fio", "job", "direction", "lat_us", "count"]


def fio_clat_bins(report, job_file):
    """Rows (job, direction, lat_us, count) of fio's json+ completion
    latency histogram ("clat_ns": {"bins": {ns: count}}): what pooled
    percentiles over several runs are computed from."""
    rows = []
    for job in report.get("jobs", []):
        for direction in ("read", "write"):
            bins = job.get(direction, {}).get("clat_ns", {}).get("bins")
            if not bins:
                continue
            base = {"fio": job_file, "job": job["jobname"], "direction": direction}
            try:
                rows += [{**base, "lat_us": int(ns) / 1e3, "count": int(n)}
                         for ns, n in bins.items()]
            except (TypeError, ValueError) as e:
                raise run.RunError(f"fio {job_file}: bad clat bin: {e}") from None
    return rows


def read_table(path, columns):
    """An optional CSV as a DataFrame with at least columns, or None
    without the file."""
    if not os.path.exists(path):
        return None
    try:
        df = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as e:
        raise run.RunError(f"{path}: {e}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise run.RunError(f"{path}: missing columns {missing}")
    return df


def load_probe_histogram(path):
    """probe-histogram.csv of lab-mmap-probe -H, or None without it: the
    buckets must be contiguous and the counts whole numbers."""
    df = read_table(path, HISTOGRAM_COLUMNS)
    if df is None:
        return None
    df = df[HISTOGRAM_COLUMNS]
    if df.isna().any().any() or not all(pd.api.types.is_integer_dtype(t) for t in df.dtypes):
        raise run.RunError(f"{path}: bucket bounds and counts must be whole numbers")
    lo, hi, n = (df[c].to_numpy() for c in HISTOGRAM_COLUMNS)
    if (lo[1:] != hi[:-1]).any() or (hi <= lo).any() or (n < 0).any():
        raise run.RunError(f"{path}: buckets are not contiguous [lo, hi) ranges with counts")
    return df


def load_attribution(path):
    """attribution.csv from the tracefs reader, or None without it."""
    df = read_table(path, ATTRIBUTION_COLUMNS)
    if df is None:
        return None
    # lab-reclaim-attrib's rows with lru "-" carry reclaim time per
    # reclaimer, not pages scanned in a lruvec.
    if "lru" in df.columns:
        df = df[df["lru"] != "-"]
    return df[ATTRIBUTION_COLUMNS]


class Run:
    """One run folder's files, loaded lazily where they are large."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.name = os.path.basename(self.path)
        m = RUN_NAME.match(self.name)
        # An old arm name (a run from before a rename) is read as today's.
        self.folder_arm = arms_table.canonical(m.group("arm")) if m else None
        self.folder_kernel = m.group("kernel") if m else None
        self.scenario_dir = os.path.basename(os.path.dirname(self.path))
        self.provenance = run.read_keyvalue(self.file("provenance.txt"))
        self.status = run.read_keyvalue(self.file("status.txt"))
        self.params = run.load_parameters(self.file("params-resolved.env"))
        self.build_id = read_text(self.file("kernel-build-id.txt"))
        self.guest_state = run.load_guest_state(self.path)
        # How fast the guest hashed (MB/s), None for a run from before it
        # measured: the same host drifts (scenarios/lib/params.sh).
        speed = self.guest_state.get("guest_cpu_mbps", "")
        self.guest_cpu_mbps = int(speed) if speed.isdigit() and int(speed) > 0 else None
        self.arm = arms_table.canonical(self.provenance.get("arm", self.folder_arm))
        self.scenario = self.provenance.get("scenario", self.scenario_dir)
        self.kernel = (self.provenance.get("kernel_label") or self.folder_kernel
                       or self.provenance.get("kernel_flavour")
                       or self.status.get("kernel_flavour") or DEFAULT_KERNEL)
        self._samples = None
        self._cgroups = None
        self._cgroup_mode = None

    def file(self, name):
        return os.path.join(self.path, name)

    def has(self, name):
        return os.path.exists(self.file(name))

    @property
    def samples(self):
        """Long table time_s, cgroup, key, value."""
        if self._samples is None:
            path = self.file("samples.csv")
            if not os.path.exists(path):
                raise run.RunError(f"{path}: missing (did the sampler run?)")
            self._samples = pd.read_csv(path, dtype={"cgroup": str, "key": str})
        return self._samples

    def forget_samples(self):
        """Drops the cached samples: a matrix of runs does not fit in memory
        at once, and only a few runs are plotted."""
        self._samples = None

    def phases(self):
        return pd.DataFrame(run.load_phases(self.file("phases.csv")),
                            columns=["phase", "start_s", "end_s"])

    def measured_phase(self):
        """(name, start_s, end_s) of the phase the run measures."""
        return run.measured_phase(run.load_phases(self.file("phases.csv")),
                                  self.guest_state.get("measured_phase"))

    def probe_latencies(self, window=None):
        """The probe's bursts; with window (start_s, end_s), those that
        started in it (run.load_probe_bursts)."""
        start, end = window if window is not None else (None, None)
        bursts = run.load_probe_bursts(self.file("probe-latency.csv"), start, end)
        df = pd.DataFrame(bursts, columns=["start_s", "latency_us"])
        # Whole microseconds, as lab-mmap-probe writes them.
        if (df["latency_us"] % 1 == 0).all():
            df["latency_us"] = df["latency_us"].astype("int64")
        return df

    def fio(self):
        rows = []
        for name in FIO_REPORTS:
            report = load_fio(self.file(name))
            if report is not None:
                rows += fio_clat(report, name[len("fio-"):-len(".json")])
        return pd.DataFrame(rows, columns=["fio", "job", "direction", "stat", "value_us"])

    def fio_bins(self):
        """fio's completion latency histograms (json+), or None when no
        report has them (runs from before json+)."""
        rows = []
        for name in FIO_REPORTS:
            report = load_fio(self.file(name))
            if report is not None:
                rows += fio_clat_bins(report, name[len("fio-"):-len(".json")])
        if not rows:
            return None
        return pd.DataFrame(rows, columns=FIO_BIN_COLUMNS)

    def attribution(self):
        return load_attribution(self.file("attribution.csv"))

    def probe_histogram(self):
        return load_probe_histogram(self.file("probe-histogram.csv"))

    def proactive(self):
        return proactive.read(self.file("proactive.csv"))

    def writeback_cp(self):
        """writeback-cp.csv with, per iteration, the seconds reclaim slept
        in reclaim_throttle() by reason ("throttle.<reason>_s"), over the
        iteration's phase (copy and alloc); NaN without the hist."""
        df = writeback_cp.read(self.file("writeback-cp.csv"))
        if df is None:
            return None
        path = self.file("reclaim-throttle.csv")
        # One read of the file per iteration, not one per (iteration, reason).
        per_iteration = [run.load_reclaim_throttle(path, f"iteration-{int(i)}")
                         for i in df["iteration"]]
        for reason in run.THROTTLE_REASONS:
            df[f"throttle.{reason}_s"] = [
                t["by_reason"].get(reason, {}).get("delayed_s", 0.0)
                if isinstance(t, dict) else math.nan for t in per_iteration]
        return df

    def _sampled_cgroups(self):
        return set(self.samples["cgroup"].unique())

    def cgroup_mode(self):
        """v1 or v2 (run.cgroup_mode), worked out once: series() asks for
        every counter."""
        if self._cgroup_mode is None:
            self._cgroup_mode = run.cgroup_mode(self.guest_state, self._sampled_cgroups())
        return self._cgroup_mode

    def cgroups(self):
        """The run's parent, dirtiers and neighbour as samples.csv names
        them (run.run_cgroups: cgroups.csv, or the old names)."""
        if self._cgroups is None:
            self._cgroups = run.run_cgroups(self.path, self._sampled_cgroups(),
                                            self.cgroup_mode())
        return self._cgroups

    def series(self, cgroup, key):
        """One counter or gauge as a Series indexed by time_s: cgroup as
        samples.csv names it (Run.cgroups), key by its v2 name, translated
        for a cgroup v1 run (run.actual_key); empty for cgroup None."""
        s = self.samples
        key = run.actual_key(self.cgroup_mode(), key)
        sel = s[(s["cgroup"] == cgroup) & (s["key"] == key)]
        return pd.Series(sel["value"].to_numpy(), index=sel["time_s"].to_numpy(),
                         name=f"{cgroup}:{key}").sort_index()
