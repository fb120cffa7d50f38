"""One run folder: its samples, phases and per-phase summary.

A run folder is what lab/run-scenario.sh leaves under
results/<scenario>/<timestamp>-<arm>/.  samples.csv is the sampler's long
format (time_s, cgroup, key, value); phases.csv has no header and one
"name,start_s,end_s" row per phase, on the sampler's clock;
params-resolved.env holds the scenario's parameters as the guest resolved
them.  A scenario states its precondition there: PRECONDITION_WRITEBACK_SHARE
is the least share of the dirtier's file LRU that must be under writeback
during the measured phase (no such parameter: no precondition).
cgroups.csv names the run's cgroups by their role (run_cgroups).
"""
import bisect
import csv
import math
import os
import re
from collections import namedtuple

from memcg_lab import sampler_cost, toggle_cost

# The roles a cgroup plays in a run, the words of cgroups.csv's role
# column: the lab parent, the dirtiers, the neighbour, and members only
# some shapes make (writeback-cp's copiers, the allocators of
# writeback-cp and stress, stress's churners).  The guest's one list is
# cgroup_roles in scenarios/lib/cgroups.sh;
# tests/unit/test_cgroups_csv.py keeps the two equal.
ROLES = ("parent", "dirtier", "neighbour", "copier", "alloc", "churn")

# The names the guest has always given the parent, the dirtier and the
# neighbour: runs from before cgroups.csv are read with them
# (fallback_cgroups); code reads a run's names from run_cgroups.
SLICE = "lab.slice"
DIRTIER = "lab.slice/dirtier.scope"
NEIGHBOUR = "lab.slice/neighbour.scope"

# On cgroup v1 (scenario cgroup-v1) the guest makes memcg-lab/<name> with
# cgcreate, and memory.stat names dirty and writeback pages differently.
# Keys are named the v2 way in code; actual_key() translates.
V1_CGROUPS = {SLICE: "memcg-lab", DIRTIER: "memcg-lab/dirtier",
              NEIGHBOUR: "memcg-lab/neighbour"}
V1_KEYS = {"memory.stat.file_writeback": "memory.stat.writeback",
           "memory.stat.file_dirty": "memory.stat.dirty"}


def cgroup_mode(state, sampled):
    """v1 or v2: as guest-state.txt says (state: load_guest_state), else,
    for runs from before it said, 'v1' when the sampler saw the v1 lab
    parent (sampled: the cgroups samples.csv names)."""
    return state.get("cgroup_mode") or ("v1" if V1_CGROUPS[SLICE] in sampled else "v2")


def actual_key(mode, key):
    """key as the sampler wrote it for a run in mode."""
    return V1_KEYS.get(key, key) if mode == "v1" else key


# (role, key) counters whose increase over the measured phase is the
# cost; "-" is the system-wide /proc/vmstat.
COUNTERS = [
    ("neighbour", "memory.pressure.some.total"),
    ("neighbour", "memory.pressure.full.total"),
    ("neighbour", "cpu.stat.system_usec"),
    ("neighbour", "cpu.stat.user_usec"),
    ("neighbour", "memory.stat.pgscan"),
    ("neighbour", "memory.stat.pgsteal"),
    ("neighbour", "memory.stat.workingset_refault_file"),
    # Major faults count the same under MGLRU and the classic LRU, where
    # workingset_refault_file does not (lru_gen_refault() counts only a
    # refault of the faulting memcg's own oldest generation).
    ("neighbour", "memory.stat.pgmajfault"),
    ("dirtier", "memory.stat.pgscan"),
    ("dirtier", "memory.stat.pgsteal"),
    ("dirtier", "memory.stat.pgactivate"),
    ("dirtier", "memory.stat.pgdeactivate"),
    ("dirtier", "memory.stat.pgrefill"),
    ("parent", "memory.stat.pgscan"),
    ("parent", "memory.stat.pgsteal"),
    ("parent", "memory.events.max"),
    ("parent", "memory.events.oom_kill"),
    # pgscan_file/pgsteal_file count every reclaim; the _direct/_kswapd
    # pairs and pgrefill only global reclaim, not memcg limit reclaim.
    ("-", "vmstat.pgscan_file"),
    ("-", "vmstat.pgsteal_file"),
    ("-", "vmstat.pgscan_direct"),
    ("-", "vmstat.pgscan_kswapd"),
    ("-", "vmstat.pgsteal_direct"),
    ("-", "vmstat.pgsteal_kswapd"),
    ("-", "vmstat.pgactivate"),
    ("-", "vmstat.pgdeactivate"),
    ("-", "vmstat.pgrefill"),
    ("-", "vmstat.pgrotated"),
    ("-", "vmstat.nr_vmscan_immediate_reclaim"),
    # Global direct reclaim entries, per zone the allocation allowed.
    ("-", "vmstat.allocstall_dma"),
    ("-", "vmstat.allocstall_dma32"),
    ("-", "vmstat.allocstall_normal"),
    ("-", "vmstat.allocstall_movable"),
    # Pages whose writeback completed: what the stick took in the phase
    # (the dirtier is its only writer).
    ("-", "vmstat.nr_written"),
    # Series v4's 100 ms sleeps of writers over their memcg's dirty limit
    # without cgroup writeback (patch 16); absent on other kernels.
    ("-", "vmstat.dirty_throttle_memcg"),
]


# dirty-many runs NR_DIRTIERS dirtiers, lab.slice/dirtier-<n>.scope.
MANY_DIRTIERS = re.compile(r"lab\.slice/dirtier-(\d+)\.scope")
DIRTIER_KEYS = [key for role, key in COUNTERS if role == "dirtier"]


class Cgroups(namedtuple("Cgroups", "parent dirtiers neighbour")):
    """A run's cgroups as samples.csv names them: the parent, the
    dirtiers (a list, in the order the guest made them) and the
    neighbour (None for a run without one)."""

    @property
    def dirtier(self):
        """The dirtier of a run with one: the per-dirtier counters and
        metrics are of it; None with several (dirty-many) or none."""
        return self.dirtiers[0] if len(self.dirtiers) == 1 else None


class RunError(Exception):
    """A run folder that cannot be summarised (missing or broken files)."""


def load_samples(path):
    """{(cgroup, key): [(t, value), ...]} sorted by time."""
    series = {}
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header != ["time_s", "cgroup", "key", "value"]:
                raise RunError(f"{path}: not a lab-sampler CSV (header {header})")
            for lineno, row in enumerate(reader, start=2):
                if len(row) != 4:
                    raise RunError(f"{path}:{lineno}: expected 4 fields, got {len(row)}")
                try:
                    t, v = float(row[0]), float(row[3])
                except ValueError as e:
                    raise RunError(f"{path}:{lineno}: {e}") from None
                series.setdefault((row[1], row[2]), []).append((t, v))
    except FileNotFoundError:
        raise RunError(f"{path}: missing (did the sampler run?)") from None
    for points in series.values():
        points.sort()
    return series


def load_phases(path):
    """[(name, start_s, end_s)] in file order."""
    phases = []
    try:
        with open(path, newline="") as f:
            for lineno, row in enumerate(csv.reader(f), start=1):
                if len(row) != 3:
                    raise RunError(f"{path}:{lineno}: expected name,start_s,end_s")
                name, start, end = row[0], float(row[1]), float(row[2])
                if end < start:
                    raise RunError(f"{path}:{lineno}: phase {name} ends before it starts")
                phases.append((name, start, end))
    except FileNotFoundError:
        raise RunError(f"{path}: missing (the scenario marked no phase)") from None
    return phases


def measured_phase(phases, declared=None):
    """The phase a scenario measures: the one its shape declared
    (guest-state.txt measured_phase, load_guest_state), else, for a run
    from before shapes declared it or a shape that measures several
    (writeback-cp's iterations), 'neighbour' if present, else the longest
    phase that is not the final drain."""
    named = {p[0]: p for p in phases}
    if declared:
        if declared not in named:
            raise RunError(f"the measured phase {declared} (guest-state.txt) is not in phases.csv")
        return named[declared]
    if "neighbour" in named:
        return named["neighbour"]
    candidates = [p for p in phases if p[0] != "drain"]
    if not candidates:
        raise RunError("no measured phase in phases.csv")
    return max(candidates, key=lambda p: p[2] - p[1])


def in_window(points, start, end):
    return [(t, v) for t, v in points if start <= t <= end]


def sampling_gap(times):
    """A key's own sampling interval: the median gap between its samples
    (lab-sampler -s reads some files less often than others; a cgroup
    that was absent for a while leaves one long gap)."""
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    return percentile(gaps, 50) if gaps else 0.0


def nearest_sample(times, boundary, gap, start):
    """Index of the sample to take at a phase boundary (start or end):
    the nearest inside the phase, or the nearest outside it when that one
    is nearer still and within one sampling gap (so not across a time the
    cgroup was absent).  None when neither exists."""
    if start:
        k = bisect.bisect_left(times, boundary)
        inside, outside = (k if k < len(times) else None), (k - 1 if k > 0 else None)
    else:
        k = bisect.bisect_right(times, boundary)
        inside, outside = (k - 1 if k > 0 else None), (k if k < len(times) else None)
    if outside is not None:
        d_out = abs(times[outside] - boundary)
        if d_out <= gap and (inside is None or d_out < abs(times[inside] - boundary)):
            return outside
    return inside


def delta(points, start, end):
    """Increase of a counter over [start, end], between its own samples
    nearest to start and to end (nearest_sample): keys are not all
    sampled at the same times (lab-sampler -s), and a slow key's nearest
    sample may lie just outside the phase, e.g. the sampler's first tick
    or the one it takes when stopped.  None without two distinct samples."""
    times = [t for t, _ in points]
    gap = sampling_gap(times)
    first = nearest_sample(times, start, gap, start=True)
    last = nearest_sample(times, end, gap, start=False)
    if first is None or last is None or times[first] >= times[last]:
        return None
    return points[last][1] - points[first][1]


def writeback_shares(series, cgroup, start, end, mode="v2"):
    """Per-sample file_writeback / file LRU and / inactive_file of cgroup
    (as samples.csv names it).

    With the patch series, folios parked on LRU_IMMEDIATE ("immediate" in
    memory.stat) are off the inactive and active lists but still on the
    file LRU, where the 2011 inactive list had them: they count in both
    denominators.  Kernels without it have no such key (0)."""
    def get(key):
        name = (cgroup, actual_key(mode, "memory.stat." + key))
        return dict(in_window(series.get(name, []), start, end))

    wb, inact, act = get("file_writeback"), get("inactive_file"), get("active_file")
    parked = get("immediate")
    of_lru, of_inactive = [], []
    for t in sorted(wb):
        if t in inact and t in act:
            inactive = inact[t] + parked.get(t, 0)
            if inactive + act[t] > 0:
                of_lru.append(wb[t] / (inactive + act[t]))
            if inactive > 0:
                of_inactive.append(min(1.0, wb[t] / inactive))
    return of_lru, of_inactive


def writeback_stalls(series, start, end):
    """How the device completed writeback over [start, end]: the stretches
    of consecutive vmstat samples in which nr_written did not move while
    nr_writeback was not 0, from the sampler's 1 s vmstat reads.  A
    device that completes a request at a time has none longer than a
    sample gap; vfat on the stick completes one bio of tens of MiB at
    once every 9-11 s (RESULTS.md, "How the stick completes
    writeback").  {"max_s", "share",
    "intervals", "bursts", "burst_pages_median", "burst_period_s"}
    (share: of the phase's sampled time; a burst: the pages completed in
    the sample after a stall of BURST_AFTER_STALL_S or more, and the
    period the mean time between bursts), or None without the keys."""
    written = in_window(series.get(("-", "vmstat.nr_written"), []), start, end)
    pending = dict(series.get(("-", "vmstat.nr_writeback"), []))
    if len(written) < 2 or not pending:
        return None
    longest = stalled = run = 0.0
    bursts = []
    for (t0, w0), (t1, w1) in zip(written, written[1:]):
        if w1 == w0 and pending.get(t0, 0) > 0:
            run += t1 - t0
            stalled += t1 - t0
        else:
            if w1 > w0 and run >= BURST_AFTER_STALL_S:
                bursts.append((t1, w1 - w0))
            run = 0.0
        longest = max(longest, run)
    span = written[-1][0] - written[0][0]
    return {"max_s": round(longest, 3),
            "share": round(stalled / span, 4) if span > 0 else None,
            "intervals": len(written) - 1,
            "bursts": len(bursts),
            "burst_pages_median": percentile([b for _, b in bursts], 50) if bursts else None,
            "burst_period_s": (round((bursts[-1][0] - bursts[0][0]) / (len(bursts) - 1), 3)
                               if len(bursts) > 1 else None)}


# A stall this long before a completion makes that completion a burst:
# several sampler ticks (1 s) with nothing, then many pages at once.
BURST_AFTER_STALL_S = 2.0


def load_stick_bdi(path, phase):
    """The stick's bdi state at the begin and end of phase, from
    bdi-stick.csv (scenarios/lib/instruments.sh, record_stick_bdi):
    {key: {"begin": v, "end": v}} in the file's units (kB, kBps), or None
    without the file."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return None
    out = {}
    for lineno, r in enumerate(rows, start=2):
        if r.get("phase") != phase:
            continue
        try:
            out.setdefault(r["key"], {})[r["event"]] = int(r["value"])
        except (KeyError, TypeError, ValueError):
            raise RunError(f"{path}:{lineno}: expected phase,event,uptime_s,key,value") from None
    return out


def read_keyvalue(path):
    """key=value lines ({} without the file): the run folder's
    provenance.txt, status.txt, guest-state.txt, params-resolved.env."""
    out = {}
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    out[name] = value
    return out


def load_guest_state(run_dir):
    """guest-state.txt, what the guest recorded about itself: {key:
    value} ({} without the file), "cgroup_mode" cut to v1 or v2 (the line
    also names the lab parent)."""
    state = read_keyvalue(os.path.join(run_dir, "guest-state.txt"))
    if "cgroup_mode" in state:
        state["cgroup_mode"] = state["cgroup_mode"].split(" ")[0]
    return state


def load_parameters(path):
    """The guest's resolved parameters as strings ({} without the file)."""
    return {name: value.strip("'") for name, value in read_keyvalue(path).items()}


def read_cgroups(path):
    """cgroups.csv, the cgroups the guest made for the run and the role of
    each (scenarios/lib/cgroups.sh, record_member): [(role, cgroup)] in
    the order it made them, cgroup as samples.csv names it; None without
    the file (a run from before it).  RunError naming the file (and line)
    for a header other than role,cgroup, a short row or a role not in
    ROLES."""
    try:
        f = open(path, newline="")
    except FileNotFoundError:
        return None
    rows = []
    with f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != ["role", "cgroup"]:
            raise RunError(f"{path}: expected the header role,cgroup, got {header}")
        for lineno, row in enumerate(reader, start=2):
            if len(row) != 2 or not row[1]:
                raise RunError(f"{path}:{lineno}: expected role,cgroup, got {row}")
            if row[0] not in ROLES:
                raise RunError(f"{path}:{lineno}: unknown role {row[0]!r} "
                               f"(known: {', '.join(ROLES)})")
            rows.append((row[0], row[1]))
    return rows


def run_cgroups(run_dir, sampled, mode):
    """The run's Cgroups: from its cgroups.csv (read_cgroups), or for a
    run from before it the names the guest gave them then
    (fallback_cgroups).  sampled: the cgroups samples.csv names; mode:
    v1 or v2."""
    path = os.path.join(run_dir, "cgroups.csv")
    rows = read_cgroups(path)
    if rows is None:
        return fallback_cgroups(sampled, mode)
    by_role = {}
    for role, cgroup in rows:
        by_role.setdefault(role, []).append(cgroup)
    parents, neighbours = by_role.get("parent", []), by_role.get("neighbour", [])
    if len(parents) != 1:
        raise RunError(f"{path}: {len(parents)} parent rows, expected one")
    if len(neighbours) > 1:
        raise RunError(f"{path}: {len(neighbours)} neighbour rows, expected one at most")
    return Cgroups(parents[0], by_role.get("dirtier", []),
                   neighbours[0] if neighbours else None)


def fallback_cgroups(sampled, mode):
    """A run from before cgroups.csv: the parent, dirtier and neighbour
    under the names the guest gave them then (SLICE, DIRTIER, NEIGHBOUR,
    or V1_CGROUPS's on cgroup v1), the neighbour even where the run had
    none; dirty-many's dirtiers are the dirtier-<n>.scope the sampler
    read (MANY_DIRTIERS), in numeric order."""
    many = sorted((cg for cg in sampled if MANY_DIRTIERS.fullmatch(cg)),
                  key=lambda cg: int(MANY_DIRTIERS.fullmatch(cg).group(1)))

    def name(cgroup):
        return V1_CGROUPS.get(cgroup, cgroup) if mode == "v1" else cgroup

    return Cgroups(name(SLICE), [name(cg) for cg in many or [DIRTIER]], name(NEIGHBOUR))


def precondition_threshold(params):
    raw = params.get("PRECONDITION_WRITEBACK_SHARE")
    # "none": a scenario built on another that states one (the floors)
    if raw is None or raw == "none":
        return None
    try:
        share = float(raw)
    except ValueError:
        raise RunError(f"PRECONDITION_WRITEBACK_SHARE={raw!r} is not a number") from None
    if not 0 < share <= 1:
        raise RunError(f"PRECONDITION_WRITEBACK_SHARE={raw} is not in (0, 1]")
    return share


def percentile(values, q):
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def load_probe_bursts(path, start=None, end=None):
    """The probe's bursts (probe-latency.csv) as (start_s, latency_us);
    with a window, only the bursts that started in it (the measured
    phase ends at NEIGHBOUR_S, and a burst begun after it belongs to the
    tail).  [] without the file."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        bursts = [(float(r["start_s"]), float(r["latency_us"])) for r in csv.DictReader(f)]
    return [b for b in bursts if start is None or start <= b[0] < end]


# The sampler's exit line (guest-rootfs/tools/lab-sampler.c, report_cpu):
# key=value words after this prefix.
SAMPLER_COST_PREFIX = "lab-sampler: cost "
SAMPLER_COST_KEYS = {"ticks": int, "wall_s": float, "cpu_s": float, "user_s": float,
                     "system_s": float, "ticks_missed": int, "slow_cgroups": int,
                     "cgroups": int, "vmstat": str}
# The sentence the sampler wrote before its line was key=value; the
# clauses after "of one CPU" came later still.
SAMPLER_COST_SENTENCE = re.compile(
    r"lab-sampler: (\d+) ticks in ([\d.]+) s, cpu ([\d.]+) s .*?([\d.]+)% of one CPU"
    r"(?:, (\d+) ticks missed, (\d+) of (\d+) cgroups slow(?:, vmstat (slow|fast))?)?")


def parse_sampler_cost(text):
    """The last exit line of the sampler in text, as {key: value} (the
    keys it had: ticks, wall_s and cpu_s always; an old sentence also
    its rounded cpu_pct_of_one), or None."""
    found = None
    for line in text.splitlines():
        at = line.find(SAMPLER_COST_PREFIX)
        if at >= 0:
            words = dict(w.split("=", 1) for w in line[at + len(SAMPLER_COST_PREFIX):].split()
                         if "=" in w)
            try:
                cost = {k: f(words[k]) for k, f in SAMPLER_COST_KEYS.items() if k in words}
            except ValueError:
                cost = {}
            found = cost if {"ticks", "wall_s", "cpu_s"} <= set(cost) else None
            continue
        m = SAMPLER_COST_SENTENCE.search(line)
        if m:
            values = dict(zip(("ticks", "wall_s", "cpu_s", "cpu_pct_of_one", "ticks_missed",
                               "slow_cgroups", "cgroups", "vmstat"), m.groups()))
            found = {k: SAMPLER_COST_KEYS.get(k, float)(v) for k, v in values.items()
                     if v is not None}
    return found


def load_sampler_cost(path, params):
    """The sampler's own cost, from the line it writes to sampler.log at
    exit, with the intervals it ran at (None without the line): that of
    every file, and that of its slow files (cpu.stat, io.stat,
    memory.events/pressure; SAMPLE_SLOW_MS, which runs from before it
    lack: they read every file at SAMPLE_MS), how many cgroups it read
    wholly at the slow rate (lab-sampler -S) and whether /proc/vmstat too
    (-V); None from before the sampler said, when it read them all at
    SAMPLE_MS."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        cost = parse_sampler_cost(f.read())
    if cost is None:
        return None
    interval = params.get("SAMPLE_MS")
    slow = params.get("SAMPLE_SLOW_MS", interval)
    wall = cost["wall_s"]
    pct = cost.get("cpu_pct_of_one", round(100 * cost["cpu_s"] / wall, 2) if wall > 0 else 0.0)
    return {"interval_ms": int(interval) if interval else None,
            "slow_interval_ms": int(slow) if slow else None, "ticks": cost["ticks"],
            "wall_s": wall, "cpu_s": cost["cpu_s"],
            "cpu_pct_of_one": pct,
            "slow_cgroups": cost.get("slow_cgroups"),
            "vmstat_slow": cost["vmstat"] == "slow" if "vmstat" in cost else None}


def load_neighbour_reads(path, phases):
    """MiB the neighbour's reader read in the measured phase
    (neighbour-io.txt: its processes' rchar when the phase ended), or
    None: without the file (runs from before it, whose reads are fio's
    total, the tail's included) or when the neighbour was done by then
    (fio's total is the phase's).  Done by then also when PHASES has no
    neighbour-tail: the neighbour ended as the runner looked, and its
    rchar, taken as its reader's processes exited, may have lost theirs
    (runs from before neighbour.sh marked the reader's stop; 7 December
    2026, a count of 136 KiB beside fio's 1426 MiB).  RunError for a
    value not a count."""
    value = read_keyvalue(path).get("rchar_at_phase_end")
    if value is None:
        return None
    if not value.isdigit():
        raise RunError(f"{path}: rchar_at_phase_end={value} is not a byte count")
    if not any(p[0] == "neighbour-tail" for p in phases):
        return None
    return int(value) / (1 << 20)


def load_run_oom_kills(run_dir):
    """OOM kills in the guest over the whole run, from boot to the drain
    (/proc/vmstat oom_kill in vmstat-start.txt and vmstat-end.txt), or
    None without both: the measured phase's are the parent's
    memory.events, but a writer killed while it is being stopped loses
    its report, and the run must still say so."""
    counts = []
    for name in ("vmstat-start.txt", "vmstat-end.txt"):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            value = next((line.split()[1] for line in f
                          if line.startswith("oom_kill ") and len(line.split()) == 2), None)
        if value is None or not value.isdigit():
            return None
        counts.append(int(value))
    return counts[1] - counts[0]


# mm_vmscan_throttled's reasons; "parked" is series v2's OOM-edge wait
# for parked writeback (VMSCAN_THROTTLE_PARKED).
THROTTLE_REASONS = ["writeback", "congested", "noprogress", "isolated", "parked"]


def load_reclaim_throttle(path, phase):
    """reclaim-throttle.csv's rows of one phase summed per reason, and per
    (reason, task name) for the tasks that slept: {"by_reason": {reason:
    {"sleeps", "delayed_s"}}, "by_task": {...}}, and with the cgroup
    column per cgroup ("by_cgroup") and per (reason, cgroup)
    ("by_reason_cgroup", keys "reason:cgroup").  None without the file,
    "not available" when the guest could not set the hist trigger."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        first = f.readline()
        if not first.startswith("phase,"):
            return "not available"
        by_reason, by_task, by_cgroup, by_reason_cgroup = {}, {}, {}, {}
        for row in csv.DictReader(f, fieldnames=first.strip().split(",")):
            if row["phase"] != phase:
                continue
            sleeps, delayed = int(row["sleeps"]), int(row["delayed_us"]) / 1e6
            # kswapd0, kworker/u4:2 and lab-alloc are tasks; pids differ.
            # The cgroup column is newer: older files have none.
            tables = [(by_reason, row["reason"]), (by_task, f"{row['reason']}:{row['comm']}")]
            if row.get("cgroup"):
                tables.append((by_cgroup, row["cgroup"]))
                tables.append((by_reason_cgroup, f"{row['reason']}:{row['cgroup']}"))
            for table, key in tables:
                t = table.setdefault(key, {"sleeps": 0, "delayed_s": 0.0})
                t["sleeps"] += sleeps
                t["delayed_s"] += delayed
    return {"by_reason": by_reason, "by_task": by_task, "by_cgroup": by_cgroup,
            "by_reason_cgroup": by_reason_cgroup}


# The spinlock's own frames and the lruvec's lock helpers: the caller
# that contended is the first frame past them.
LOCK_FRAMES = ("queued_spin_lock_slowpath", "native_queued_spin_lock_slowpath",
               "_raw_spin_lock", "do_raw_spin_lock", "folio_lruvec_lock",
               "folio_lruvec_relock")
# The series' per-completion unpark: one lru_lock round trip per parked
# folio whose writeback ends (patch 0004).
UNPARK_FRAME = "folio_rotate_immediate"


def load_lock_contention(path, phase):
    """lock-contention.csv (SET="LOCK_CONTENTION=1") of one phase:
    {"contentions", "unpark" (stacks through the series' unpark),
    "dropped", "by_caller" {first frame past the lock's own: count}};
    None without the file."""
    if not os.path.exists(path):
        return None
    out = {"contentions": 0, "unpark": 0, "dropped": 0, "by_caller": {}}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["phase"] != phase:
                continue
            n = int(row["contentions"])
            if row["stack"].startswith("(dropped"):
                out["dropped"] += n
                continue
            frames = row["stack"].split(";")
            out["contentions"] += n
            if UNPARK_FRAME in frames:
                out["unpark"] += n
            caller = next((fr for fr in frames if not fr.startswith(LOCK_FRAMES)), "?")
            out["by_caller"][caller] = out["by_caller"].get(caller, 0) + n
    return out


ATTRIBUTION_NEEDS = ("reclaimer_cgroup", "scanned_cgroup", "nr_scanned", "reclaim_ns",
                     "events", "lru")


def attribution_rows(csv_path):
    """lab-reclaim-attrib's rows; RunError naming missing columns."""
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ATTRIBUTION_NEEDS if c not in (reader.fieldnames or [])]
        if missing:
            raise RunError(f"{csv_path}: missing columns {', '.join(missing)}")
        return list(reader)


def load_attribution(csv_path):
    """attribution.csv, read once: {"coverage": load_attribution_coverage,
    "passes": reclaim_passes}; None without the file."""
    if not os.path.exists(csv_path):
        return None
    rows = attribution_rows(csv_path)
    return {"coverage": load_attribution_coverage(csv_path, rows),
            "passes": reclaim_passes(rows)}


# How far the attribution may stray from memory.stat's pgscan and still
# account for every page: 6.1 flushes a memcg's stats on read only when
# more than 64 updates per CPU are pending (a few hundred pages on the
# lab's 2 CPUs), and a reclaim pass counts pgscan when it isolates up to
# 32 pages per CPU but fires its event when it ends.
ATTRIBUTION_SLACK_PAGES = 1024


def load_attribution_coverage(csv_path, rows):
    """How much of each memcg's pgscan the attribution rows account for:
    lab-reclaim-attrib writes every memcg's memory.stat pgscan beside its
    CSV (attribution.csv.pgscan) before it installs its hists and after
    it has read them (the outer window: the hists cannot have counted
    more), and, since the lab's tool of 7 Dec 2026, after installing and
    before reading (the inner window: they cannot have counted less).  A
    memcg's rows with it as the scanned cgroup should sum to a count in
    between.  {cgroup: {"pgscan" (outer), "pgscan_inner" (None for an
    older run), "attributed", "ratio" (of the outer), "within" (between
    the windows, give or take ATTRIBUTION_SLACK_PAGES; None without the
    inner)}} for the memcgs with no child memcg (pgscan is
    hierarchical), and with lost events ("hist_dropped", "lost_rows")
    from the .meta; None without the .pgscan file (a run from before
    it).  rows: attribution_rows(csv_path)."""
    side = csv_path + ".pgscan"
    if not os.path.exists(side):
        return None
    pgscan, inner = {}, {}
    with open(side) as f:
        for r in csv.DictReader(f):
            pgscan[r["cgroup"]] = int(r["pgscan_end"]) - int(r["pgscan_start"])
            if r.get("pgscan_inner_end") is not None:
                inner[r["cgroup"]] = int(r["pgscan_inner_end"]) - int(r["pgscan_inner_start"])
    attributed = {}
    for r in rows:
        if r["lru"] != "-":
            attributed[r["scanned_cgroup"]] = (attributed.get(r["scanned_cgroup"], 0)
                                               + int(r["nr_scanned"]))
    leaves = [cg for cg in pgscan
              if cg != "/" and not any(o.startswith(cg + "/") for o in pgscan)]
    out = {"memcgs": {}}
    for cg in sorted(leaves):
        if not pgscan[cg] and not attributed.get(cg):
            continue
        got, low = attributed.get(cg, 0), inner.get(cg)
        out["memcgs"][cg] = {
            "pgscan": pgscan[cg], "pgscan_inner": low, "attributed": got,
            "ratio": got / pgscan[cg] if pgscan[cg] else None,
            "within": None if low is None else
            low - ATTRIBUTION_SLACK_PAGES <= got <= pgscan[cg] + ATTRIBUTION_SLACK_PAGES}
    meta = {}
    if os.path.exists(csv_path + ".meta"):
        with open(csv_path + ".meta") as f:
            meta = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    out["source"] = meta.get("source", "trace_pipe")
    for key in ("hist_dropped", "lost_rows", "unresolved_pids", "install_ms", "read_ms"):
        if key in meta:
            out[key] = int(meta[key])
    return out


def sampler_intervals(interval, slow, slow_cgroups=None, vmstat_slow=None):
    """'100 ms', or '100 ms (slow files 1000 ms)' when they differ, and
    '(slow files, 2 cgroup(s), /proc/vmstat 1000 ms)' with cgroups and
    /proc/vmstat read wholly at the slow rate."""
    at = f"{interval:.0f} ms" if interval else "an unrecorded interval"
    if slow and slow != interval:
        what = ["slow files"]
        if slow_cgroups:
            what.append(f"{slow_cgroups:.0f} cgroup(s)")
        if vmstat_slow:
            what.append("/proc/vmstat")
        at += f" ({', '.join(what)} {slow:.0f} ms)"
    return at


# The floor scenarios' preconditions: (parameter, memory.stat key, "at
# least" or "at most", what it says), each judged on the dirtier's
# median over the measured phase, in MiB.
FOOTPRINT_CHECKS = [
    ("PRECONDITION_PINNED_MB", "shmem", "at least", "pinned tmpfs (shmem)"),
    ("PRECONDITION_WRITEBACK_MAX_MB", "file_writeback", "at most", "file_writeback"),
]


def footprint_checks(series, params, start, end, mode, dirtier):
    """[{"what", "limit_mib", "median_mib", "met"}] for the footprint
    preconditions the scenario states (FOOTPRINT_CHECKS), judged on the
    cgroup dirtier (Cgroups.dirtier: None, not met)."""
    checks = []
    for param, key, how, what in FOOTPRINT_CHECKS:
        raw = params.get(param)
        if raw is None:
            continue
        try:
            limit = float(raw)
        except ValueError:
            raise RunError(f"{param}={raw!r} is not a number") from None
        name = (dirtier, actual_key(mode, "memory.stat." + key))
        values = [v / (1 << 20) for _, v in in_window(series.get(name, []), start, end)]
        median = percentile(values, 50) if values else None
        met = median is not None and (median >= limit if how == "at least" else median <= limit)
        checks.append({"what": f"dirtier {what} {how} {limit:g} MiB", "limit_mib": limit,
                       "median_mib": median, "met": met})
    return checks


def judge_precondition(series, dirtiers, threshold, start, end, mode):
    """The precondition over the measured phase, judged per dirtier: with
    several, every one must meet it, and the top-level figures are those of
    the dirtier with the lowest median share; a run without a dirtier
    (writeback-cp) has no samples and has not met it."""
    per = {}
    for cg in dirtiers:
        of_lru, of_inactive = writeback_shares(series, cg, start, end, mode)
        d = {"samples": len(of_lru)}
        if of_lru:
            d.update({
                "writeback_of_file_lru_median": percentile(of_lru, 50),
                "writeback_of_file_lru_min": min(of_lru),
                "writeback_of_inactive_median": percentile(of_inactive, 50),
            })
        if threshold is not None:
            # A dirtier without samples in the measured phase has not met it.
            d["met"] = bool(of_lru) and d["writeback_of_file_lru_median"] >= threshold
        per[cg] = d
    worst = min(per.values(), key=lambda d: d.get("writeback_of_file_lru_median", -1),
                default={"samples": 0})
    pre = {"threshold": threshold, "met": None}
    pre.update({k: v for k, v in worst.items() if k != "met"})
    if threshold is not None:
        pre["met"] = bool(per) and all(d["met"] for d in per.values())
    if len(per) > 1:
        pre["per_dirtier"] = per
    return pre


def summarise(run_dir):
    series = load_samples(os.path.join(run_dir, "samples.csv"))
    phases = load_phases(os.path.join(run_dir, "phases.csv"))
    state = load_guest_state(run_dir)
    name, start, end = measured_phase(phases, state.get("measured_phase"))
    sampled = {cg for cg, _ in series}
    mode = cgroup_mode(state, sampled)
    cgroups = run_cgroups(run_dir, sampled, mode)
    summary = {"run": os.path.abspath(run_dir), "phase": name, "cgroup_mode": mode,
               "phase_s": round(end - start, 3), "phase_window_s": [start, end],
               "counters": {}}
    of_role = {"parent": cgroups.parent, "dirtier": cgroups.dirtier,
               "neighbour": cgroups.neighbour, "-": "-"}
    # Several dirtiers (dirty-many): each one's counters, after the rest.
    extra = [(cg, key) for cg in cgroups.dirtiers if cg != cgroups.dirtier
             for key in DIRTIER_KEYS]
    for cgroup, key in [(of_role[role], key) for role, key in COUNTERS] + extra:
        key = actual_key(mode, key)
        points = series.get((cgroup, key))
        if cgroup is not None and points is not None:
            summary["counters"][f"{cgroup}:{key}"] = delta(points, start, end)

    params = load_parameters(os.path.join(run_dir, "params-resolved.env"))
    threshold = precondition_threshold(params)
    summary["precondition"] = judge_precondition(series, cgroups.dirtiers, threshold,
                                                 start, end, mode)
    checks = footprint_checks(series, params, start, end, mode, cgroups.dirtier)
    if checks:
        pre = summary["precondition"]
        pre["footprint"] = checks
        pre["met"] = all(c["met"] for c in checks) and pre["met"] is not False

    scanned = summary["counters"].get(f"{cgroups.parent}:memory.stat.pgscan")
    stolen = summary["counters"].get(f"{cgroups.parent}:memory.stat.pgsteal")
    if scanned:
        summary["parent_reclaim_efficiency"] = stolen / scanned
    bdi = load_stick_bdi(os.path.join(run_dir, "bdi-stick.csv"), name)
    if bdi:
        summary["stick_bdi"] = bdi
    stalls = writeback_stalls(series, start, end)
    if stalls is not None:
        summary["writeback_stalls"] = stalls
    lat = [latency for _, latency in
           load_probe_bursts(os.path.join(run_dir, "probe-latency.csv"), start, end)]
    if lat:
        summary["probe_latency_us"] = {
            "n": len(lat), "p50": percentile(lat, 50), "p90": percentile(lat, 90),
            "p99": percentile(lat, 99), "max": max(lat)}
    cost = load_sampler_cost(os.path.join(run_dir, "sampler.log"), params)
    if cost:
        summary["sampler"] = cost
    read_mib = load_neighbour_reads(os.path.join(run_dir, "neighbour-io.txt"), phases)
    if read_mib is not None:
        summary["neighbour_read_mib"] = read_mib
    oom_kills = load_run_oom_kills(run_dir)
    if oom_kills is not None:
        summary["run_oom_kills"] = oom_kills
    throttle = load_reclaim_throttle(os.path.join(run_dir, "reclaim-throttle.csv"), name)
    if throttle is not None:
        summary["reclaim_throttle"] = throttle
    locks = load_lock_contention(os.path.join(run_dir, "lock-contention.csv"), name)
    if locks is not None:
        summary["lock_contention"] = locks
    # The files only some runs have: summary key, loader, file.
    for key, loader, name in (("sampler_configs", sampler_cost.read, "sampler-cost.csv"),
                              ("attribution_cost", toggle_cost.read, "toggle-cost.csv")):
        value = loader(os.path.join(run_dir, name))
        if value is not None:
            summary[key] = value
    attribution = load_attribution(os.path.join(run_dir, "attribution.csv"))
    if attribution is not None:
        summary["reclaim_passes"] = attribution["passes"]
        if attribution["coverage"] is not None:
            summary["attribution_coverage"] = attribution["coverage"]
    # What the per-unit-of-work metrics and the guards need.
    for key, param in (("probe_mb", "PROBE_MB"), ("stick_write_bps", "STICK_WRITE_BPS")):
        try:
            summary[key] = float(params[param])
        except (KeyError, ValueError):
            summary[key] = None
    return summary


def reclaim_passes(rows):
    """Time in direct and memcg reclaim passes per reclaiming cgroup, from
    lab-reclaim-attrib's rows with lru "-": {cgroup: {"s", "passes"}}.
    A pass's time includes its sleeps in reclaim_throttle(), which happen
    inside it."""
    out = {}
    for r in rows:
        if r["lru"] != "-":
            continue
        p = out.setdefault(r["reclaimer_cgroup"], {"s": 0.0, "passes": 0})
        p["s"] += int(r["reclaim_ns"]) / 1e9
        p["passes"] += int(r["events"])
    return out


def format_summary(s):
    lines = [f"run {s['run']}", f"measured phase: {s['phase']} ({s['phase_s']} s)"]
    pre = s["precondition"]
    for c in pre.get("footprint", []):
        got = "no samples" if c["median_mib"] is None else f"median {c['median_mib']:.1f} MiB"
        lines.append(f"precondition ({c['what']}): {'MET' if c['met'] else 'NOT MET'}, {got}")
    if pre["threshold"] is None:
        if not pre.get("footprint"):
            lines.append("precondition: none stated by the scenario")
    elif not pre["samples"]:
        lines.append("precondition: NOT MET (no dirtier samples in the measured phase)")
    else:
        lines.append(
            "precondition (dirtier file_writeback / file LRU >= "
            f"{pre['threshold']:.0%}): {'MET' if pre['met'] else 'NOT MET'}, median "
            f"{pre['writeback_of_file_lru_median']:.1%}, min "
            f"{pre['writeback_of_file_lru_min']:.1%}, of inactive_file "
            f"{pre['writeback_of_inactive_median']:.1%} ({pre['samples']} samples)"
            + (f", the least of {len(pre['per_dirtier'])} dirtiers"
               if "per_dirtier" in pre else ""))
        for cg, d in pre.get("per_dirtier", {}).items():
            share = d.get("writeback_of_file_lru_median")
            lines.append(f"  {cg}: {'MET' if d.get('met') else 'NOT MET'}, median "
                         + ("n/a (no samples)" if share is None else f"{share:.1%}"))
    for key, value in s["counters"].items():
        lines.append(f"  {key:58s} {'n/a' if value is None else f'{value:.0f}'}")
    if "parent_reclaim_efficiency" in s:
        lines.append(f"parent reclaim efficiency (pgsteal/pgscan): "
                     f"{s['parent_reclaim_efficiency']:.1%}")
    if "writeback_stalls" in s:
        w = s["writeback_stalls"]
        share = "n/a" if w["share"] is None else f"{w['share']:.0%}"
        lines.append(f"device stalls (nr_written still, writeback pending): longest "
                     f"{w['max_s']:.1f} s, {share} of the phase ({w['intervals']} samples)")
        if w.get("burst_period_s") is not None:
            lines.append(f"  completions in bursts: {w['bursts']}, median "
                         f"{w['burst_pages_median']:.0f} pages, one every {w['burst_period_s']:.1f} s")
    bw = s.get("stick_bdi", {}).get("BdiWriteBandwidth")
    if bw:
        lines.append("stick's write bandwidth estimate (bdi): "
                     + ", ".join(f"{e} {bw[e] / 1024:.1f} MiB/s" for e in ("begin", "end") if e in bw))
    if "probe_latency_us" in s:
        p = s["probe_latency_us"]
        lines.append(f"neighbour fault latency (us): p50 {p['p50']:.0f} p90 {p['p90']:.0f}"
                     f" p99 {p['p99']:.0f} max {p['max']:.0f} (n={p['n']})")
    if "neighbour_read_mib" in s:
        lines.append(f"neighbour's reader read {s['neighbour_read_mib']:.1f} MiB in the phase")
    throttle = s.get("reclaim_throttle")
    if throttle == "not available":
        lines.append("reclaim_throttle() sleeps: not available on this kernel")
    elif throttle is not None:
        parts = [f"{r} {t['sleeps']} for {t['delayed_s']:.2f} s"
                 for r, t in sorted(throttle["by_reason"].items())]
        lines.append("reclaim_throttle() sleeps in the phase: " + ("; ".join(parts) or "none"))
        top = sorted(throttle["by_task"].items(), key=lambda kv: -kv[1]["delayed_s"])[:5]
        for key, t in top:
            lines.append(f"  {key:40s} {t['sleeps']:6d} sleeps {t['delayed_s']:8.2f} s")
    locks = s.get("lock_contention")
    if locks is not None:
        lines.append(f"spinlock contentions in the phase: {locks['contentions']}, "
                     f"{locks['unpark']} through the series' unpark ({UNPARK_FRAME})"
                     + (f"; {locks['dropped']} dropped (hist full)" if locks["dropped"] else ""))
        for caller, n in sorted(locks["by_caller"].items(), key=lambda kv: -kv[1])[:5]:
            lines.append(f"  {caller:40s} {n:8d}")
    cov = s.get("attribution_coverage")
    if cov:
        lost = ", ".join(f"{k} {cov[k]}" for k in ("hist_dropped", "lost_rows", "unresolved_pids")
                         if k in cov)
        gaps = (f"; installing took {cov['install_ms']} ms, reading {cov['read_ms']} ms"
                if "install_ms" in cov else "")
        lines.append(f"attribution (attribution.csv, from {cov['source']}"
                     + (f"; {lost}" if lost else "") + gaps + "): pages scanned per memcg "
                     "against its memory.stat pgscan from before installing to after reading "
                     "the hists (and from after installing to before reading)")
        for cg, c in cov["memcgs"].items():
            ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:.1%}"
            inner = ("" if c.get("pgscan_inner") is None else
                     f" (inner {c['pgscan_inner']:>10d}: "
                     + ("within" if c["within"] else "OUTSIDE") + ")")
            lines.append(f"  {cg:40s} {c['attributed']:>10d} of {c['pgscan']:>10d}  {ratio}{inner}")
    if "attribution_cost" in s:
        c = s["attribution_cost"]
        parts = [f"{w} {c[w]['us_per_1000_pages']:.0f} us" if c[w]["us_per_1000_pages"] is not None
                 else f"{w} n/a" for w in ("on", "off")]
        ratio = "n/a" if c["on_over_off"] is None else f"{c['on_over_off']:.3f}"
        lines.append("attribution cost to the reclaiming dirtier (system CPU per 1000 pages "
                     f"scanned, lab-reclaim-attrib on/off windows): {', '.join(parts)}; "
                     f"on/off {ratio}")
    if "sampler" in s:
        c = s["sampler"]
        lines.append(f"sampler cost: {c['cpu_pct_of_one']:.2f}% of one CPU at "
                     f"{sampler_intervals(c['interval_ms'], c.get('slow_interval_ms'), c.get('slow_cgroups'), c.get('vmstat_slow'))}"
                     f" ({c['ticks']} ticks, {c['cpu_s']:.2f} s in {c['wall_s']:.0f} s)")
    if "sampler_configs" in s:
        configs = s["sampler_configs"]
        first = next(iter(configs))
        lines.append(f"sampler cost per configuration (sampler-cost.csv; CPU % of one CPU, "
                     f"median over runs; x = against {first}):")
        for name, c in configs.items():
            x = "n/a" if c["of_first"] is None else f"{c['of_first']:.2f}"
            lines.append(f"  {name:18s} {c['cpu_pct_median']:6.2f}% (min {c['cpu_pct_min']:.2f},"
                         f" max {c['cpu_pct_max']:.2f}, {c['runs']} runs) x {x:>5s}  "
                         f"{c['ms_per_tick_median']:.2f} ms/tick "
                         f"{c['rows_per_tick_median']:.0f} rows/tick  [{c['args']}]")
    return "\n".join(lines)
