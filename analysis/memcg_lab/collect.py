"""Every run under a results tree, judged and flattened into tidy tables.

Dataset.runs has one row per run folder found, with valid=False and the
reason for those excluded; the other tables hold valid runs only, keyed
by scenario, arm and run (the folder name).

The compared unit is the cell (kernel label, arm).  When every run found
is of one kernel, a cell is named by its arm alone, and reports look as
they did before the kernel axis; with runs of several kernels the "arm"
column of every table holds "<kernel>:<arm>" (cell_name), so each table
has a column per (kernel, arm), as mmtests' compare-kernels has one per
kernel.  Dataset.runs also says each run's kernel.
"""
import os
import re

import pandas as pd

from memcg_lab import arms_table, load, metrics, proactive, run, validate, writeback_cp

KEY_COLUMNS = ["scenario", "arm", "run"]

# Tables of optional per-run files, each read by the load.Run method of
# its name: the Dataset attribute -> its columns when no run has the file.
OPTIONAL_TABLES = {
    "attribution": load.ATTRIBUTION_COLUMNS,
    "probe_histogram": load.HISTOGRAM_COLUMNS,
    "proactive": proactive.COLUMNS,
    "writeback_cp": ["iteration"] + writeback_cp.ALLOC_KEYS,
    "fio_bins": load.FIO_BIN_COLUMNS,
}


class Dataset:
    def __init__(self, results):
        self.results = os.path.abspath(results)
        self.loaded = {}      # run id -> load.Run, valid runs only
        self.notes = {}       # scenario -> [warning]
        rows, metric_rows, probe_rows, fio_rows = [], [], [], []
        optional_frames = {name: [] for name in OPTIONAL_TABLES}
        found = [load.Run(p) for p in load.find_runs(results)]
        summaries, problems = {}, {}
        for i, r in enumerate(found):
            summaries[i], error = None, None
            try:
                summaries[i] = run.summarise(r.path)
            except run.RunError as e:
                error = str(e)
            problems[i] = validate.run_problem(r, summaries[i], error)
        groups = {}
        for i, r in enumerate(found):
            if problems[i] is None:
                groups.setdefault((r.scenario, r.kernel, r.arm), {})[i] = r
        # Runs of another kernel are another cell, never a mixed arm.
        for group in groups.values():
            problems.update(validate.arm_problems(group))
        self.kernels = sorted({r.kernel for r in found}, key=kernel_order)
        for i, r in enumerate(found):
            s = summaries.get(i)
            row = {"scenario": r.scenario, "arm": self.cell(r), "run": self.run_id(r),
                   "kernel": r.kernel,
                   "path": r.path, "valid": problems[i] is None, "reason": problems[i] or "",
                   "kernel_build_id": r.build_id or "", "git_revision": r.provenance.get("git_revision", ""),
                   "accel": r.provenance.get("accel", ""),
                   "guest_cpu_mbps": r.guest_cpu_mbps,
                   "failure_kind": validate.failure_kind(r.status),
                   "phase": s["phase"] if s else "",
                   "phase_s": s["phase_s"] if s else None}
            if s:
                row["writeback_share_median"] = s["precondition"].get("writeback_of_file_lru_median")
                cost = s.get("sampler") or {}
                row["sampler_interval_ms"] = cost.get("interval_ms")
                row["sampler_slow_interval_ms"] = cost.get("slow_interval_ms")
                row["sampler_cpu_pct"] = cost.get("cpu_pct_of_one")
                row["sampler_slow_cgroups"] = cost.get("slow_cgroups")
                row["sampler_vmstat_slow"] = cost.get("vmstat_slow")
            if problems[i] is None:
                try:
                    fio = r.fio()
                    probe = r.probe_latencies(s["phase_window_s"])
                    optional = {name: getattr(r, name)() for name in OPTIONAL_TABLES}
                except run.RunError as e:
                    row.update(valid=False, reason=f"unreadable: {e}")
                    rows.append(row)
                    continue
                key = {"scenario": r.scenario, "arm": row["arm"], "run": row["run"]}
                cgroups = r.cgroups()
                values = metrics.run_metrics(s, fio, probe, cgroups)
                values.update(metrics.window_metrics(r.series, probe, cgroups))
                r.forget_samples()
                row.update(values)
                metric_rows += [{**key, "metric": m, "value": v} for m, v in values.items()
                                if v is not None]
                probe_rows += [{**key, **p} for p in probe.to_dict("records")]
                fio_rows += [{**key, **f} for f in fio.to_dict("records")]
                for name, df in optional.items():
                    if df is not None:
                        optional_frames[name].append(df.assign(**key))
                self.loaded[row["run"]] = r
            rows.append(row)
        self.runs = pd.DataFrame(rows)
        self.metrics = pd.DataFrame(metric_rows, columns=KEY_COLUMNS + ["metric", "value"])
        self.probe = pd.DataFrame(probe_rows, columns=KEY_COLUMNS + ["start_s", "latency_us"])
        self.fio = pd.DataFrame(fio_rows, columns=KEY_COLUMNS + ["fio", "job", "direction",
                                                                 "stat", "value_us"])
        for name, frames in optional_frames.items():
            setattr(self, name, tidy(frames, OPTIONAL_TABLES[name]))
        for scenario in self.scenarios():
            valid = [self.loaded[r] for r in self.valid_runs(scenario)["run"]]
            self.notes[scenario] = validate.scenario_notes(valid)

    def cell(self, r):
        """The name of run r's (kernel, arm) cell in every table."""
        return cell_name(r.kernel, r.arm) if len(self.kernels) > 1 else r.arm

    def run_id(self, r):
        return os.path.relpath(r.path, self.results)

    def scenarios(self):
        if self.runs.empty:
            return []
        return sorted(self.runs["scenario"].unique())

    def valid_runs(self, scenario):
        if self.runs.empty:
            return self.runs
        return self.runs[(self.runs["scenario"] == scenario) & self.runs["valid"]]

    def excluded(self):
        if self.runs.empty:
            return self.runs
        return self.runs[~self.runs["valid"]][["scenario", "arm", "run", "reason"]]

    def kernel_failures(self):
        """Per (scenario, arm): runs found, runs the guest kernel failed (a
        crash is a finding: counted here, never dropped) and runs an
        emulator fault failed (an int3 QEMU ran, not the kernel's)."""
        cols = ["scenario", "arm", "runs", "kernel_failed", "emulator_failed", "example"]
        if self.runs.empty:
            return pd.DataFrame(columns=cols)
        rows = []
        for (scenario, arm), g in self.runs.groupby(["scenario", "arm"]):
            bad = g[g["failure_kind"].isin(["kernel", "emulator"])]
            if len(bad):
                rows.append({"scenario": scenario, "arm": arm, "runs": len(g),
                             "kernel_failed": int((bad["failure_kind"] == "kernel").sum()),
                             "emulator_failed": int((bad["failure_kind"] == "emulator").sum()),
                             "example": bad["reason"].iloc[0]})
        return pd.DataFrame(rows, columns=cols)

    def arms(self, scenario):
        return sorted(self.valid_runs(scenario)["arm"].unique(), key=arm_order)


def tidy(frames, columns):
    """One table of per-run frames (each with the key columns added), key
    columns first; empty, with columns, when there are none."""
    if not frames:
        return pd.DataFrame(columns=KEY_COLUMNS + columns)
    table = pd.concat(frames, ignore_index=True)
    return table[KEY_COLUMNS + [c for c in table.columns if c not in KEY_COLUMNS]]


CELL_SEPARATOR = ":"


def cell_name(kernel, arm):
    return f"{kernel}{CELL_SEPARATOR}{arm}"


def cell_parts(cell):
    """(kernel, arm) of a cell name; kernel None for a one-kernel dataset's
    cell, which is its arm."""
    kernel, sep, arm = cell.rpartition(CELL_SEPARATOR)
    return (kernel, arm) if sep else (None, cell)


def shipped_kernel_labels(lib=os.path.join(os.path.dirname(__file__), "..", "..", "lab", "lib.sh")):
    """The labels the lab builds itself, in their order, read from the one
    place that defines them (SHIPPED_KERNEL_LABELS in lab/lib.sh)."""
    try:
        with open(lib) as f:
            m = re.search(r'^SHIPPED_KERNEL_LABELS="([^"]*)"', f.read(), re.M)
    except OSError:
        return []
    return m.group(1).split() if m else []


KERNEL_ORDER = shipped_kernel_labels()


def kernel_order(kernel):
    return (KERNEL_ORDER.index(kernel) if kernel in KERNEL_ORDER else len(KERNEL_ORDER), kernel)


def arm_order(cell):
    """Cells by kernel (the shipped labels first, in lib.sh's order), then
    by arm (arm_rank: the order a cover letter compares them)."""
    kernel, arm = cell_parts(cell)
    return (kernel_order(kernel) if kernel is not None else (-1, ""),
            arm_rank(arm), arm)


def arm_rank(arm):
    """Known arms in the arms table's order, others after."""
    order = arms_table.ORDER
    return order.index(arm) if arm in order else len(order)
