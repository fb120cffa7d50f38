"""Which runs may be compared, and why the others may not.

A run that is incomplete, failed, mislabelled or missed its
precondition is excluded with a reason; so are runs of one arm whose
kernel or parameters differ from the rest of that arm, because a mean
over them would describe no kernel in particular.
"""
from collections import Counter

from memcg_lab import arms_table

REQUIRED = ["status.txt", "provenance.txt", "samples.csv", "phases.csv",
            "params-resolved.env", "kernel-build-id.txt"]

# The run's arm: the cell holds it.
VOLATILE_PARAMS = {"ARM"}

# What params-resolved.env also held before the runner's globals went
# lower-case and the file held only declared parameters (scenarios/lib/
# params.sh, write_parameters): bash's variables and the runner's.  Left
# out, so that a run from before compares with a run from after.
# Revisions of the lab itself are reported as notes instead.
NOT_PARAMETERS_BEFORE = {
    "FUNCNAME", "DIRSTACK", "OSTYPE", "SHELL", "BASH_ARGC", "BASH_ARGV", "BASH_LINENO",
    "BASH_SOURCE", "BASH_VERSINFO", "BASH_VERSION", "LAB", "OUT", "SCENARIO_DIR", "CGROOT",
    "SLICE", "ATTRIB_PID", "ATTRIB_ROUND", "LOCK_EVENT", "LOCK_FILTER", "LOCK_HIST",
    "THROTTLE_EVENT", "THROTTLE_HIST", "THROTTLE_REQUESTS", "SAMPLER_COST_KNOWN",
    "STRESS_POLICIES", "WRITEBACK_CP_KEYS", "WRITEBACK_POLICY"}


# Parameters that name the kernel (params.env's KERNEL_LABEL): the cell
# holds it already, runs from before it have none, and it differs
# between cells of two kernels by design.
KERNEL_PARAMS = {"KERNEL_LABEL"}


def failure_kind(status):
    """kernel, emulator, qemu, scenario or "" (status.txt's failure_kind, written by
    lab/run-scenario.sh's classify_run); a run from before that field
    with kernel trouble on its console is a kernel failure too."""
    kind = status.get("failure_kind")
    if kind is None and status.get("kernel_trouble"):
        return "kernel"
    return kind or ""


def run_problem(r, summary, error=None):
    """Why run r (a load.Run) cannot be used on its own, or None.
    summary is run.summarise()'s result, or None when it raised error;
    an unfinished run is called incomplete before anything else."""
    missing = [f for f in REQUIRED if not r.has(f)]
    if "status.txt" in missing:
        return "incomplete: status.txt missing (still running, or the host runner died)"
    if r.status.get("result") != "ok":
        return f"failed: result={r.status.get('result')} {r.status.get('reason', '')}".rstrip()
    if missing:
        return "incomplete: missing " + ", ".join(missing)
    # Names compared as today's arms: a run from before a rename may have
    # been relabelled in part (its folder, not its provenance.txt).
    if r.folder_arm is not None and arms_table.canonical(r.provenance.get("arm")) != r.folder_arm:
        return (f"mislabelled: folder says arm {r.folder_arm}, provenance.txt says "
                f"arm={r.provenance.get('arm')}")
    if (r.folder_kernel is not None and "kernel_label" in r.provenance
            and r.provenance["kernel_label"] != r.folder_kernel):
        return (f"mislabelled: folder says kernel {r.folder_kernel}, provenance.txt says "
                f"kernel_label={r.provenance['kernel_label']}")
    if arms_table.canonical(r.params.get("ARM", r.arm)) != r.arm:
        return f"mislabelled: provenance arm={r.arm}, guest ran ARM={r.params.get('ARM')}"
    if summary is None:
        return f"unreadable: {error}"
    cov = summary.get("attribution_coverage") or {}
    lost = {k: cov[k] for k in ("hist_dropped", "lost_rows") if cov.get(k)}
    if lost:
        return ("lossy attribution: " + ", ".join(f"{k}={v}" for k, v in lost.items())
                + " (attribution.csv.meta)")
    pre = summary["precondition"]
    failed = [c for c in pre.get("footprint", []) if not c["met"]]
    if failed:
        c = failed[0]
        got = "no samples" if c["median_mib"] is None else f"median {c['median_mib']:.1f} MiB"
        return f"precondition not met: {c['what']} ({got})"
    # In some arms the precondition's share is an outcome of the policy
    # under test, not a property of the workload (the arms table's
    # precondition_is_outcome): under "immediate", folios whose writeback
    # ends are unparked to the inactive tail, where reclaim finds them
    # clean, so the dirtier's file LRU holds fewer writeback folios for
    # the same writer (dirty-neighbour: median 75% of the file LRU,
    # against 100% under activate and keep).  Such runs are not excluded
    # for it; the workload is judged in the arms that leave writeback
    # folios in place.
    if pre["met"] is False and r.arm not in arms_table.PRECONDITION_IS_OUTCOME:
        median = pre.get("writeback_of_file_lru_median")
        got = "no dirtier samples" if median is None else f"median {median:.1%}"
        return (f"precondition not met: dirtier writeback share of file LRU {got} "
                f"< {pre['threshold']:.0%}")
    return None


def comparable_params(params):
    """The parameters runs of one cell must share and cells are compared
    on: all but the arm and the kernel's label, which are the cell (runs
    from before the label have none), and what older runs recorded that
    is not a parameter."""
    left_out = VOLATILE_PARAMS | KERNEL_PARAMS | NOT_PARAMETERS_BEFORE
    return {k: v for k, v in params.items() if k not in left_out}


def _odd_ones_out(values, what):
    """{index: reason} for entries differing from the majority value; all
    of them when there is no majority."""
    counts = Counter(values.values())
    if len(counts) <= 1:
        return {}
    (top, n_top), *rest = counts.most_common()
    if rest and rest[0][1] == n_top:
        return {i: f"mixed arm: {what} differ with no majority ({len(counts)} variants)"
                for i in values}
    return {i: f"mixed arm: {what} {describe(v)} differs from the arm's {describe(top)}"
            for i, v in values.items() if v != top}


def describe(value):
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{k}={v}" for k, v in value) + "}"
    return str(value)


def disks_of(provenance):
    """How a run got its disks (provenance.txt layout=MODE KEY): "laid
    out" in the run (fresh or save, and every run from before the
    layout cache) or "kept" (the host's copy of a recipe's layout)."""
    mode = provenance.get("layout", "fresh").split(" ")[0]
    return "kept" if mode == "cached" else "laid out"


def arm_problems(runs):
    """{run index: reason} for runs of one (scenario, kernel, arm) cell that do not
    match the group's kernel build id, guest clock, parameters or SET
    overrides."""
    builds = {i: r.build_id for i, r in runs.items()}
    problems = _odd_ones_out(builds, "kernel build id")
    # TCG wall time and CPU shares depend on the host's CPU and on the
    # accelerator (one thread per vCPU or one for all): a cell holds runs
    # of one host CPU and one accelerator string.
    for key, what in (("accel", "accelerator"), ("host_cpu", "host CPU")):
        values = {i: r.provenance.get(key, "unrecorded") for i, r in runs.items()
                  if i not in problems}
        problems.update(_odd_ones_out(values, what))
    # A run on kept disks starts with a stick that has no write history
    # unless warmed (RESULTS.md, "Laid-out disks"): not the same
    # experiment as a run that laid its files out, until shown to be.
    disks = {i: disks_of(r.provenance) for i, r in runs.items() if i not in problems}
    problems.update(_odd_ones_out(disks, "disks"))
    # Before lab commit de0def3 a TCG guest's clocks fell to jiffies (1 ms):
    # latencies, PSI and CPU times of such runs are not to be averaged with
    # those of runs on the TSC.
    clocks = {i: r.provenance.get("host_tsc_khz", "unset (jiffies clocks)")
              for i, r in runs.items() if i not in problems}
    problems.update(_odd_ones_out(clocks, "guest TSC kHz (host_tsc_khz)"))
    rest = {i: r for i, r in runs.items() if i not in problems}
    params = {i: tuple(sorted(comparable_params(r.params).items())) for i, r in rest.items()}
    bad = _odd_ones_out(params, "parameters")
    if bad:
        # Name the differing parameters rather than dumping them all.
        common = set.intersection(*(set(p) for p in params.values()))
        diff = {i: tuple(sorted(set(p) - common)) for i, p in params.items()}
        bad = {i: f"mixed arm: parameters {describe(diff[i])} differ from the rest of the arm"
               for i in bad}
    problems.update(bad)
    return problems


# The spread of guest CPU speed (max over min) past which the runs of a
# scenario are noted as perhaps not one batch.  A first guess: the
# 4-hour drift was 2x, but one batch's single 16 MiB hashes also spread
# 1.9x (RESULTS.md, the verdict), and the best-of-three figure that
# replaced them has not yet been measured over a batch.
GUEST_SPEED_SPREAD = 1.15


def scenario_notes(valid):
    """Warnings (not exclusions) about cells (kernel, arm) of one scenario
    that differ in more than the kernel and the arm: parameters, the
    host-side SET, or the guest's CPU speed."""
    notes = []
    speeds = {r.name: r.guest_cpu_mbps for r in valid if r.guest_cpu_mbps}
    if speeds and max(speeds.values()) > GUEST_SPEED_SPREAD * min(speeds.values()):
        slow, fast = min(speeds, key=speeds.get), max(speeds, key=speeds.get)
        notes.append(f"the guest's CPU speed varies {max(speeds.values()) / min(speeds.values()):.2f}x "
                     f"across the runs compared ({speeds[slow]} MB/s in {slow}, {speeds[fast]} MB/s "
                     f"in {fast}; guest-state.txt guest_cpu_mbps): compare cells of one speed")
    by_cell = {}
    for r in valid:
        by_cell.setdefault((r.kernel, r.arm), r)
    reps = list(by_cell.values())
    several_kernels = len({r.kernel for r in reps}) > 1

    def name(r):
        return f"{r.kernel}:{r.arm}" if several_kernels else r.arm

    for other in reps[1:]:
        a, b = comparable_params(reps[0].params), comparable_params(other.params)
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if keys:
            notes.append(f"arms {name(reps[0])} and {name(other)} differ in parameters: "
                         + ", ".join(f"{k}={a.get(k)!r}/{b.get(k)!r}" for k in keys))
    revs = sorted({r.provenance.get("git_revision", "?") for r in valid})
    if len(revs) > 1:
        notes.append("runs come from different lab git revisions: " + ", ".join(r[:12] for r in revs))
    dirty = sorted(r.name for r in valid if r.provenance.get("git_dirty") == "yes")
    if dirty:
        notes.append("runs made from an uncommitted lab tree (git_dirty=yes): " + ", ".join(dirty))
    return notes
