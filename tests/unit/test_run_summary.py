"""analysis/memcg_lab/run.py on small hand-made run folders: the deltas,
the precondition and the error paths are checked against hand-computed
values."""
import pytest

from memcg_lab import run

DIRTIER = run.DIRTIER
NEIGHBOUR = run.NEIGHBOUR


def write_run(path, samples, phases, params="PRECONDITION_WRITEBACK_SHARE=0.80\n"):
    (path / "params-resolved.env").write_text(params)
    lines = ["time_s,cgroup,key,value"]
    lines += [f"{t},{cg},{k},{v}" for t, cg, k, v in samples]
    (path / "samples.csv").write_text("\n".join(lines) + "\n")
    (path / "phases.csv").write_text("".join(f"{n},{a},{b}\n" for n, a, b in phases))


def test_the_phase_the_shape_declared_is_measured_not_the_longest(tmp_path):
    """guest-state.txt names the measured phase; without it (runs from
    before) the longest phase but the drain is taken, here the ramp."""
    samples = []
    for t, scan in [(0, 0), (9, 100), (10, 150), (12, 200), (20, 900)]:
        samples += [(t, DIRTIER, "memory.stat.pgscan", scan)]
    write_run(tmp_path, samples, [("ramp", 0, 9), ("toggle", 10, 12), ("drain", 13, 20)])
    assert run.summarise(tmp_path)["phase"] == "ramp"
    (tmp_path / "guest-state.txt").write_text("cgroup_mode=v2 parent=lab.slice\n"
                                              "measured_phase=toggle\n")
    s = run.summarise(tmp_path)
    assert (s["phase"], s["cgroup_mode"]) == ("toggle", "v2")
    assert s["counters"][f"{DIRTIER}:memory.stat.pgscan"] == 50
    (tmp_path / "guest-state.txt").write_text("measured_phase=neighbour\n")
    with pytest.raises(run.RunError, match="the measured phase neighbour .guest-state.txt. "
                                           "is not in phases.csv"):
        run.summarise(tmp_path)


def dirtier_lru(t, inactive, active, writeback):
    return [(t, DIRTIER, "memory.stat.inactive_file", inactive),
            (t, DIRTIER, "memory.stat.active_file", active),
            (t, DIRTIER, "memory.stat.file_writeback", writeback)]


def test_deltas_cover_only_the_measured_phase(tmp_path):
    samples = []
    for t, some, scan in [(1, 0, 0), (10, 100, 50), (11, 400, 80), (12, 1000, 200), (20, 5000, 900)]:
        samples += [(t, NEIGHBOUR, "memory.pressure.some.total", some),
                    (t, DIRTIER, "memory.stat.pgscan", scan)]
    write_run(tmp_path, samples, [("ramp", 0, 9), ("neighbour", 10, 12), ("drain", 13, 20)])
    s = run.summarise(tmp_path)
    assert s["phase"] == "neighbour"
    assert s["counters"][f"{NEIGHBOUR}:memory.pressure.some.total"] == 900
    assert s["counters"][f"{DIRTIER}:memory.stat.pgscan"] == 150


PSI = "memory.pressure.some.total"


def test_a_slow_key_uses_the_samplers_first_and_stop_ticks(tmp_path):
    # lab-sampler -i 100 -s 1000: pgscan every 0.1 s, PSI every 1 s and on
    # the first tick (just before the phase) and the stop's (just after).
    samples = [(round(10 + n / 10, 3), DIRTIER, "memory.stat.pgscan", 7 * n) for n in range(36)]
    samples += [(t, NEIGHBOUR, PSI, v) for t, v in
                [(10.0, 100), (11.0, 200), (12.0, 300), (13.0, 400), (13.55, 455)]]
    write_run(tmp_path, samples, [("neighbour", 10.04, 13.52)])
    c = run.summarise(tmp_path)["counters"]
    assert c[f"{NEIGHBOUR}:{PSI}"] == 455 - 100
    # pgscan's nearest samples: 10.0 (0.04 before) and 13.5 (0.02 before the end)
    assert c[f"{DIRTIER}:memory.stat.pgscan"] == 7 * 35


def test_a_slow_key_takes_its_nearest_sample_either_side_of_a_boundary(tmp_path):
    samples = [(float(t), NEIGHBOUR, PSI, t * 10) for t in range(0, 40)]
    # every 10 s, a phase in the middle: 20 (0.4 before) and 30 (0.7 after)
    samples = [s for s in samples if s[0] % 10 == 0]
    write_run(tmp_path, samples, [("neighbour", 20.4, 29.3)])
    assert run.summarise(tmp_path)["counters"][f"{NEIGHBOUR}:{PSI}"] == 300 - 200
    # a phase shorter than the key's interval still has a delta: 10 .. 20
    write_run(tmp_path, samples, [("neighbour", 12, 18)])
    assert run.summarise(tmp_path)["counters"][f"{NEIGHBOUR}:{PSI}"] == 200 - 100


def test_a_sample_across_a_gap_is_not_the_nearest(tmp_path):
    # The cgroup was absent from 5 to 20 s (its counters restarted): 5 is
    # nearer to the phase's start at 13 than 20, but a gap away.
    samples = [(float(t), NEIGHBOUR, PSI, 1000 + t) for t in range(0, 6)]
    samples += [(float(t), NEIGHBOUR, PSI, t) for t in range(20, 31)]
    write_run(tmp_path, samples, [("neighbour", 13, 25.2)])
    assert run.summarise(tmp_path)["counters"][f"{NEIGHBOUR}:{PSI}"] == 25 - 20
    # no sample within the phase or a gap of it: no delta
    write_run(tmp_path, samples, [("neighbour", 8, 17)])
    assert run.summarise(tmp_path)["counters"][f"{NEIGHBOUR}:{PSI}"] is None


def test_precondition_uses_the_median_writeback_share(tmp_path):
    # shares of the file LRU: 0.9, 0.85, 0.5 -> median 0.85 (met), min 0.5
    samples = (dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 80, 20, 85)
               + dirtier_lru(12, 60, 40, 50))
    write_run(tmp_path, samples, [("neighbour", 10, 12)])
    pre = run.summarise(tmp_path)["precondition"]
    assert pre["met"] is True
    assert pre["writeback_of_file_lru_median"] == pytest.approx(0.85)
    assert pre["writeback_of_file_lru_min"] == pytest.approx(0.5)
    assert pre["samples"] == 3


def many_dirtier_lru(t, n, inactive, active, writeback):
    cg = f"lab.slice/dirtier-{n}.scope"
    return [(t, cg, "memory.stat.inactive_file", inactive),
            (t, cg, "memory.stat.active_file", active),
            (t, cg, "memory.stat.file_writeback", writeback),
            (t, cg, "memory.stat.pgscan", 10 * t * n)]


def test_several_dirtiers_must_each_meet_the_precondition(tmp_path):
    # dirty-many: dirtiers 1 and 10 at 90%, dirtier 2 at 50% of its file LRU
    samples = []
    for t in (1, 2):
        samples += (many_dirtier_lru(t, 1, 90, 10, 90) + many_dirtier_lru(t, 2, 50, 50, 50)
                    + many_dirtier_lru(t, 10, 100, 0, 90))
    write_run(tmp_path, samples, [("neighbour", 1, 2)])
    s = run.summarise(tmp_path)
    pre = s["precondition"]
    assert list(pre["per_dirtier"]) == [f"lab.slice/dirtier-{n}.scope" for n in (1, 2, 10)]
    assert [d["met"] for d in pre["per_dirtier"].values()] == [True, False, True]
    assert pre["met"] is False
    assert pre["writeback_of_file_lru_median"] == pytest.approx(0.5)
    assert s["counters"]["lab.slice/dirtier-2.scope:memory.stat.pgscan"] == 20
    text = run.format_summary(s)
    assert "the least of 3 dirtiers" in text
    assert "lab.slice/dirtier-2.scope: NOT MET, median 50.0%" in text


def test_precondition_not_met_is_reported(tmp_path):
    write_run(tmp_path, dirtier_lru(1, 100, 100, 20) + dirtier_lru(2, 100, 100, 30),
              [("neighbour", 1, 2)])
    assert run.summarise(tmp_path)["precondition"]["met"] is False


def test_no_stated_precondition_is_not_judged(tmp_path):
    write_run(tmp_path, dirtier_lru(1, 100, 100, 20) + dirtier_lru(2, 100, 100, 30),
              [("write", 1, 2)], params="SHAPE=smoke\n")
    s = run.summarise(tmp_path)
    assert s["precondition"]["met"] is None
    assert "none stated" in run.format_summary(s)


def test_stated_precondition_without_dirtier_samples_is_not_met(tmp_path):
    write_run(tmp_path, [(1, NEIGHBOUR, "memory.stat.pgscan", 0),
                         (2, NEIGHBOUR, "memory.stat.pgscan", 5)], [("neighbour", 1, 2)])
    s = run.summarise(tmp_path)
    assert s["precondition"]["met"] is False
    assert "NOT MET" in run.format_summary(s)


def test_bad_precondition_parameter_is_an_error(tmp_path):
    write_run(tmp_path, dirtier_lru(1, 1, 1, 1), [("neighbour", 1, 2)],
              params="PRECONDITION_WRITEBACK_SHARE=lots\n")
    with pytest.raises(run.RunError, match="not a number"):
        run.summarise(tmp_path)


def test_percentile_interpolates():
    assert run.percentile([1, 2, 3, 4], 50) == 2.5
    assert run.percentile([5], 99) == 5
    assert run.percentile([], 50) is None


@pytest.mark.parametrize("breakage, message", [
    ("no-samples", "samples.csv: missing"),
    ("no-phases", "phases.csv: missing"),
    ("bad-header", "not a lab-sampler CSV"),
    ("short-row", "expected 4 fields"),
    ("backwards-phase", "ends before it starts"),
])
def test_broken_runs_raise_clear_errors(tmp_path, breakage, message):
    write_run(tmp_path, dirtier_lru(1, 1, 1, 1), [("neighbour", 1, 2)])
    if breakage == "no-samples":
        (tmp_path / "samples.csv").unlink()
    elif breakage == "no-phases":
        (tmp_path / "phases.csv").unlink()
    elif breakage == "bad-header":
        (tmp_path / "samples.csv").write_text("a,b\n")
    elif breakage == "short-row":
        (tmp_path / "samples.csv").write_text("time_s,cgroup,key,value\n1,x,y\n")
    elif breakage == "backwards-phase":
        (tmp_path / "phases.csv").write_text("neighbour,5,1\n")
    with pytest.raises(run.RunError, match=message):
        run.summarise(tmp_path)


def test_cgroup_v1_names_are_translated(tmp_path):
    # cgroup-v1 scenario: memcg-lab/dirtier, memory.stat writeback/dirty
    samples = []
    for t, wb in [(10, 90), (11, 85), (12, 50)]:
        samples += [(t, "memcg-lab/dirtier", "memory.stat.inactive_file", 90),
                    (t, "memcg-lab/dirtier", "memory.stat.active_file", 10),
                    (t, "memcg-lab/dirtier", "memory.stat.writeback", wb),
                    (t, "memcg-lab", "memory.stat.cache", 1),
                    (t, "memcg-lab/neighbour", "memory.stat.workingset_refault_file", t * 3)]
    write_run(tmp_path, samples, [("neighbour", 10, 12)])
    s = run.summarise(tmp_path)
    assert s["cgroup_mode"] == "v1"
    assert s["precondition"]["met"] is True
    assert s["precondition"]["writeback_of_file_lru_median"] == pytest.approx(0.85)
    assert s["counters"] == {"memcg-lab/neighbour:memory.stat.workingset_refault_file": 6}


def test_parked_folios_count_in_the_file_lru(tmp_path):
    # 40 inactive + 20 active + 40 parked, 90 under writeback: 90% of the
    # file LRU (without the parked pages it would read 150%).
    samples = [(t, DIRTIER, k, v) for t in (1, 2) for k, v in (
        ("memory.stat.inactive_file", 40), ("memory.stat.active_file", 20),
        ("memory.stat.immediate", 40), ("memory.stat.file_writeback", 90))]
    write_run(tmp_path, samples, [("neighbour", 1, 2)])
    pre = run.summarise(tmp_path)["precondition"]
    assert pre["writeback_of_file_lru_median"] == pytest.approx(0.9)
    assert pre["writeback_of_inactive_median"] == pytest.approx(1.0)


@pytest.mark.parametrize("params, line, slow_ms, slow_cgroups, vmstat_slow", [
    # today's key=value line
    ("SAMPLE_MS=100\nSAMPLE_SLOW_MS=1000\n",
     "lab-sampler: cost ticks=1200 wall_s=120.400 cpu_s=0.950 user_s=0.210 system_s=0.740"
     " ticks_missed=3 slow_cgroups=2 cgroups=4 vmstat=slow", 1000, 2, True),
    # the sentence of a run from before SAMPLE_SLOW_MS, which read every
    # file at SAMPLE_MS
    ("SAMPLE_MS=100\n",
     "lab-sampler: 1200 ticks in 120.4 s, cpu 0.950 s (user 0.210, system 0.740),"
     " 0.79% of one CPU", 100, None, None),
])
def test_sampler_cost_is_read_from_its_exit_line(tmp_path, params, line, slow_ms, slow_cgroups,
                                                  vmstat_slow):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("neighbour", 10, 11)], params=params)
    (tmp_path / "sampler.log").write_text(
        f"lab-sampler: /sys/fs/cgroup/x: No such file or directory\n{line}\n")
    s = run.summarise(tmp_path)
    assert s["sampler"] == {"interval_ms": 100, "slow_interval_ms": slow_ms, "ticks": 1200,
                            "wall_s": 120.4, "cpu_s": 0.95, "cpu_pct_of_one": 0.79,
                            "slow_cgroups": slow_cgroups, "vmstat_slow": vmstat_slow}
    assert "sampler cost: 0.79% of one CPU at 100 ms" in run.format_summary(s)


@pytest.mark.parametrize("tail, slow_cgroups, vmstat_slow, at", [
    # before -S and -V the exit line ended at "of one CPU"
    ("", None, None, "(slow files 1000 ms)"),
    (", 3 ticks missed, 0 of 4 cgroups slow, vmstat fast", 0, False, "(slow files 1000 ms)"),
    (", 3 ticks missed, 2 of 4 cgroups slow, vmstat slow", 2, True,
     "(slow files, 2 cgroup(s), /proc/vmstat 1000 ms)"),
])
def test_sampler_cost_names_what_it_read_at_the_slow_rate(tmp_path, tail, slow_cgroups,
                                                           vmstat_slow, at):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("neighbour", 10, 11)], params="SAMPLE_MS=100\nSAMPLE_SLOW_MS=1000\n")
    (tmp_path / "sampler.log").write_text(
        "lab-sampler: 1200 ticks in 120.4 s, cpu 0.300 s (user 0.100, system 0.200),"
        f" 0.25% of one CPU{tail}\n")
    s = run.summarise(tmp_path)
    assert (s["sampler"]["interval_ms"], s["sampler"]["slow_interval_ms"]) == (100, 1000)
    assert (s["sampler"]["slow_cgroups"], s["sampler"]["vmstat_slow"]) == (slow_cgroups,
                                                                            vmstat_slow)
    assert f"sampler cost: 0.25% of one CPU at 100 ms {at}" in run.format_summary(s)


def test_no_sampler_line_means_no_cost(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90), [("neighbour", 10, 11)])
    (tmp_path / "sampler.log").write_text("killed\n")
    assert "sampler" not in run.summarise(tmp_path)


def test_reclaim_throttle_sleeps_are_summed_per_reason_and_task_in_the_phase(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("ramp", 0, 9), ("neighbour", 10, 11)])
    (tmp_path / "reclaim-throttle.csv").write_text(
        "phase,reason,comm,pid,sleeps,delayed_us\n"
        "ramp,writeback,kswapd0,41,100,9000000\n"
        "neighbour,writeback,lab-mmap-probe,300,3,250000\n"
        "neighbour,writeback,lab-mmap-probe,301,2,100000\n"
        "neighbour,writeback,kswapd0,41,1,100000\n"
        "neighbour,noprogress,fio,280,7,7000\n"
        "neighbour,parked,fio,280,4,400000\n")
    s = run.summarise(tmp_path)
    t = s["reclaim_throttle"]
    assert t["by_reason"]["parked"] == {"sleeps": 4, "delayed_s": pytest.approx(0.4)}
    assert t["by_reason"]["writeback"] == {"sleeps": 6, "delayed_s": pytest.approx(0.45)}
    assert t["by_reason"]["noprogress"] == {"sleeps": 7, "delayed_s": pytest.approx(0.007)}
    assert t["by_task"]["writeback:lab-mmap-probe"]["sleeps"] == 5
    assert t["by_cgroup"] == {}     # a file from before the cgroup column
    text = run.format_summary(s)
    assert "reclaim_throttle() sleeps in the phase: noprogress 7 for 0.01 s; parked 4 for 0.40 s; writeback 6 for 0.45 s" in text


def test_reclaim_throttle_without_sleeps_or_without_the_trigger(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("neighbour", 10, 11)])
    assert "reclaim_throttle" not in run.summarise(tmp_path)
    (tmp_path / "reclaim-throttle.csv").write_text("phase,reason,comm,pid,sleeps,delayed_us\n")
    s = run.summarise(tmp_path)
    assert s["reclaim_throttle"] == {"by_reason": {}, "by_task": {}, "by_cgroup": {},
                                     "by_reason_cgroup": {}}
    assert "reclaim_throttle() sleeps in the phase: none" in run.format_summary(s)
    (tmp_path / "reclaim-throttle.csv").write_text("not available: cannot set a hist trigger\n")
    assert "not available on this kernel" in run.format_summary(run.summarise(tmp_path))


SAMPLER_COST_HEADER = "round,config,args,rows,exit_line\n"


def exit_line(ticks, wall, cpu):
    return (f'"lab-sampler: cost ticks={ticks} wall_s={wall} cpu_s={cpu} user_s=0.1 system_s=0.1'
            f' ticks_missed=0 slow_cgroups=0 cgroups=4 vmstat=fast"')


def old_exit_line(ticks, wall, cpu):
    return (f'"lab-sampler: {ticks} ticks in {wall} s, cpu {cpu} s (user 0.1, system 0.1),'
            f' 1.00% of one CPU, 0 ticks missed, 0 of 4 cgroups slow, vmstat fast"')


def test_sampler_configs_are_summarised_against_the_first(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("neighbour", 10, 11)])
    (tmp_path / "sampler-cost.csv").write_text(
        SAMPLER_COST_HEADER
        + f"1,all-fast,-i 100,30000,{exit_line(300, 30.0, 1.2)}\n"
        + f"1,all-slow,-i 1000,3000,{exit_line(30, 30.0, 0.15)}\n"
        + f"2,all-slow,-i 1000,3000,{old_exit_line(30, 30.0, 0.09)}\n"
        + f"2,all-fast,-i 100,30000,{exit_line(300, 30.0, 0.6)}\n")
    s = run.summarise(tmp_path)
    fast, slow = s["sampler_configs"]["all-fast"], s["sampler_configs"]["all-slow"]
    assert list(s["sampler_configs"]) == ["all-fast", "all-slow"]
    # % of one CPU: 4 and 2 -> median 3; 0.5 and 0.3 -> 0.4
    assert fast["runs"] == 2 and fast["cpu_pct_median"] == pytest.approx(3.0)
    assert (fast["cpu_pct_min"], fast["cpu_pct_max"]) == (pytest.approx(2.0), pytest.approx(4.0))
    assert fast["ms_per_tick_median"] == pytest.approx(3.0)
    assert fast["rows_per_tick_median"] == pytest.approx(100)
    assert slow["cpu_pct_median"] == pytest.approx(0.4)
    assert slow["of_first"] == pytest.approx(0.4 / 3.0)
    text = run.format_summary(s)
    assert "x = against all-fast" in text
    assert "all-slow" in text and "x  0.13" in text and "[-i 1000]" in text


@pytest.mark.parametrize("body, why", [
    ("", "no rows"),
    (f"1,all-fast,-i 100,x,{exit_line(300, 30.0, 1.2)}\n", ":2: not a sampler-cost row"),
    ("1,all-fast,-i 100,10,lab-sampler: stopped\n", ":2: not a sampler-cost row"),
    (f"1,all-fast,-i 100,10,{exit_line(0, 30.0, 1.2)}\n", ":2: no ticks or no time"),
])
def test_a_broken_sampler_cost_file_is_an_error(tmp_path, body, why):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90), [("neighbour", 10, 11)])
    (tmp_path / "sampler-cost.csv").write_text(SAMPLER_COST_HEADER + body)
    with pytest.raises(run.RunError, match=why):
        run.summarise(tmp_path)


def test_probe_bursts_count_only_when_they_start_in_the_measured_phase(tmp_path):
    # the neighbour-tail phase after NEIGHBOUR_S is not measured
    write_run(tmp_path, [(10, NEIGHBOUR, PSI, 0), (12, NEIGHBOUR, PSI, 5)],
              [("neighbour", 10, 12), ("neighbour-tail", 12, 30)])
    (tmp_path / "probe-latency.csv").write_text(
        "start_s,latency_us\n9.5,1\n10.0,100\n11.9,300\n12.0,9000000\n")
    s = run.summarise(tmp_path)
    assert s["phase"] == "neighbour" and s["phase_window_s"] == [10, 12]
    assert s["probe_latency_us"]["n"] == 2
    assert s["probe_latency_us"]["max"] == 300


def write_attribution(path, rows, pgscan, meta="mode=patched\nsource=hist\nhist_dropped=0\n"):
    """pgscan: (cgroup, start, end) as the tool wrote it until 7 Dec 2026,
    or (cgroup, start, end, inner_start, inner_end) as it writes now."""
    (path / "attribution.csv").write_text(
        "reclaimer_cgroup,scanned_cgroup,nr_scanned,nr_reclaimed,reclaim_ns,events,"
        "target_cgroup,lru,nr_writeback,nr_immediate\n"
        + "".join(f"{r},{s},{n},0,0,1,lab.slice,{lru},0,0\n" for r, s, n, lru in rows))
    header = "cgroup,pgscan_start,pgscan_end" + (
        ",pgscan_inner_start,pgscan_inner_end" if len(pgscan[0]) == 5 else "")
    (path / "attribution.csv.pgscan").write_text(
        header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in pgscan))
    (path / "attribution.csv.meta").write_text(meta)


def test_attribution_coverage_compares_scanned_pages_with_each_leaf_pgscan(tmp_path):
    write_run(tmp_path, [(10, NEIGHBOUR, PSI, 0), (12, NEIGHBOUR, PSI, 5)],
              [("neighbour", 10, 12)])
    write_attribution(tmp_path, [
        (NEIGHBOUR, DIRTIER, 700, "file"), ("kswapd", DIRTIER, 280, "file"),
        (NEIGHBOUR, DIRTIER, 10, "anon"), (NEIGHBOUR, "-", 0, "-"),
        (NEIGHBOUR, NEIGHBOUR, 50, "file")],
        [("/", 0, 5000), ("lab.slice", 100, 1100), (DIRTIER, 0, 1000), (NEIGHBOUR, 0, 50),
         ("system.slice/idle.service", 7, 7)])
    cov = run.summarise(tmp_path)["attribution_coverage"]
    assert cov["memcgs"] == {
        DIRTIER: {"pgscan": 1000, "pgscan_inner": None, "attributed": 990, "ratio": 0.99,
                  "within": None},
        NEIGHBOUR: {"pgscan": 50, "pgscan_inner": None, "attributed": 50, "ratio": 1.0,
                    "within": None}}
    assert (cov["source"], cov["hist_dropped"]) == ("hist", 0)
    text = run.format_summary(run.summarise(tmp_path))
    assert f"  {DIRTIER:40s}        990 of       1000  99.0%\n" in text


@pytest.mark.parametrize("attributed,within", [(9_000_000, True), (8_100_000, True),
                                               (8_098_000, False), (9_002_000, False)])
def test_attribution_between_the_inner_and_outer_pgscan_windows_is_within(
        tmp_path, attributed, within):
    """Scanning goes on while the tool installs and reads its hists: 2%
    of the outer window can fall outside the inner one (a tracepoint-
    toggle run under TCG: 8.10M of 8.29M pages), and the attribution is
    judged against both, give or take the slack."""
    slack = run.ATTRIBUTION_SLACK_PAGES
    write_run(tmp_path, [(10, NEIGHBOUR, PSI, 0), (12, NEIGHBOUR, PSI, 5)],
              [("neighbour", 10, 12)])
    write_attribution(tmp_path, [(DIRTIER, DIRTIER, attributed, "file")],
                      [(DIRTIER, 0, 9_000_000, 400_000, 8_500_000)],
                      meta="mode=patched\nsource=hist\nhist_dropped=0\ninstall_ms=1300\nread_ms=900\n")
    assert 8_098_000 < 8_100_000 - slack and 9_002_000 > 9_000_000 + slack
    cov = run.summarise(tmp_path)["attribution_coverage"]
    c = cov["memcgs"][DIRTIER]
    assert (c["pgscan"], c["pgscan_inner"], c["within"]) == (9_000_000, 8_100_000, within)
    assert (cov["install_ms"], cov["read_ms"]) == (1300, 900)
    text = run.format_summary(run.summarise(tmp_path))
    assert "installing took 1300 ms, reading 900 ms" in text
    assert f"(inner    8100000: {'within' if within else 'OUTSIDE'})" in text


MIB = 1 << 20


@pytest.mark.parametrize("param,key,values,met", [
    ("PRECONDITION_PINNED_MB=400", "shmem", [390, 450, 460], True),
    ("PRECONDITION_PINNED_MB=400", "shmem", [10, 20, 450], False),
    ("PRECONDITION_WRITEBACK_MAX_MB=32", "file_writeback", [5, 8, 300], True),
    ("PRECONDITION_WRITEBACK_MAX_MB=32", "file_writeback", [50, 60, 8], False)])
def test_floor_footprints_are_judged_on_the_dirtiers_median(tmp_path, param, key, values, met):
    samples = [(t, DIRTIER, f"memory.stat.{key}", v * MIB) for t, v in zip((10, 11, 12), values)]
    samples.append((13, DIRTIER, f"memory.stat.{key}", 0))     # after the phase
    write_run(tmp_path, samples, [("neighbour", 10, 12)],
              params=f"PRECONDITION_WRITEBACK_SHARE=none\n{param}\n")
    s = run.summarise(tmp_path)
    pre = s["precondition"]
    assert pre["threshold"] is None
    assert pre["met"] is met
    (check,) = pre["footprint"]
    assert check["median_mib"] == sorted(values)[1]
    line = [l for l in run.format_summary(s).splitlines() if l.startswith("precondition (")][0]
    assert ("MET" if met else "NOT MET") in line and f"median {sorted(values)[1]:.1f} MiB" in line


def test_a_bad_footprint_parameter_is_an_error(tmp_path):
    write_run(tmp_path, [(10, DIRTIER, "memory.stat.shmem", 1)], [("neighbour", 10, 12)],
              params="PRECONDITION_PINNED_MB=lots\n")
    with pytest.raises(run.RunError, match="PRECONDITION_PINNED_MB='lots' is not a number"):
        run.summarise(tmp_path)


def test_reclaim_throttle_sleeps_are_summed_per_cgroup_where_recorded(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 90, 10, 90) + dirtier_lru(11, 90, 10, 90),
              [("neighbour", 10, 11)])
    (tmp_path / "reclaim-throttle.csv").write_text(
        "phase,reason,comm,pid,sleeps,delayed_us,cgroup\n"
        f"neighbour,writeback,fio,300,2,200000,{NEIGHBOUR}\n"
        f"neighbour,writeback,fio,200,9,900000,{DIRTIER}\n"
        f"neighbour,congested,lab-mmap-probe,301,1,1000,{NEIGHBOUR}\n"
        f"neighbour,parked,fio,300,3,2700000,{NEIGHBOUR}\n"
        "neighbour,congested,kworker/u4:2,99,1,1000,-\n")
    t = run.summarise(tmp_path)["reclaim_throttle"]
    by = t["by_cgroup"]
    assert by[NEIGHBOUR] == {"sleeps": 6, "delayed_s": pytest.approx(2.901)}
    assert by[DIRTIER]["sleeps"] == 9 and by["-"]["sleeps"] == 1
    # Whose tasks waited, and why: the neighbour's parked waits apart.
    assert t["by_reason_cgroup"][f"parked:{NEIGHBOUR}"] == {"sleeps": 3,
                                                            "delayed_s": pytest.approx(2.7)}
    assert f"parked:{DIRTIER}" not in t["by_reason_cgroup"]


def test_attribution_cost_is_cpu_per_page_in_on_windows_over_off_windows(tmp_path):
    write_run(tmp_path, [(10, NEIGHBOUR, PSI, 0), (12, NEIGHBOUR, PSI, 5)], [("toggle", 10, 50)])
    # on: 2000 pages for 3000 us; off: 3000 pages for 3000 us; on again: 1000 for 1500
    (tmp_path / "toggle-cost.csv").write_text(
        "time_s,next_window,pgscan,system_usec\n"
        "10,on,0,0\n20,off,2000,3000\n30,on,5000,6000\n40,on,6000,7500\n")
    c = run.summarise(tmp_path)["attribution_cost"]
    assert c["on"] == {"pages": 3000, "system_s": 0.0045, "us_per_1000_pages": 1500}
    assert c["off"]["us_per_1000_pages"] == 1000
    assert c["on_over_off"] == 1.5
    assert "on 1500 us, off 1000 us; on/off 1.500" in run.format_summary(run.summarise(tmp_path))


def written_samples(points):
    """(t, nr_written, nr_writeback) -> vmstat samples."""
    out = []
    for t, written, writeback in points:
        out += [(t, "-", "vmstat.nr_written", written), (t, "-", "vmstat.nr_writeback", writeback)]
    return out


def test_writeback_stalls_measure_the_longest_still_stretch(tmp_path):
    # Completions at 10-11 and 14-15; still from 11 to 14 with writeback
    # pending (3 s), and still again at 15-16 with nothing pending (no stall).
    points = [(10, 0, 50), (11, 100, 50), (12, 100, 50), (13, 100, 50), (14, 100, 50),
              (15, 200, 0), (16, 200, 0)]
    write_run(tmp_path, written_samples(points), [("neighbour", 10, 16)])
    w = run.summarise(tmp_path)["writeback_stalls"]
    assert w["max_s"] == 3
    assert w["share"] == 0.5
    assert w["intervals"] == 6
    # One burst (100 pages after the 3 s stall): no period from one.
    assert (w["bursts"], w["burst_pages_median"], w["burst_period_s"]) == (1, 100, None)


def test_writeback_bursts_have_a_size_and_a_period(tmp_path):
    # Still for 3 s, then 1000 pages; twice, 4 s apart; the 10 pages at 11
    # follow no stall and are no burst.
    points = [(10, 0, 50), (11, 10, 50), (12, 10, 50), (13, 10, 50), (14, 10, 50), (15, 1010, 50),
              (16, 1010, 50), (17, 1010, 50), (18, 1010, 50), (19, 2010, 50)]
    write_run(tmp_path, written_samples(points), [("neighbour", 10, 19)])
    w = run.summarise(tmp_path)["writeback_stalls"]
    assert (w["bursts"], w["burst_pages_median"], w["burst_period_s"]) == (2, 1000, 4)


def test_a_device_that_completes_every_sample_has_no_stall(tmp_path):
    points = [(t, 100 * t, 50) for t in range(10, 20)]
    write_run(tmp_path, written_samples(points), [("neighbour", 10, 19)])
    assert run.summarise(tmp_path)["writeback_stalls"] == {
        "max_s": 0, "share": 0, "intervals": 9, "bursts": 0, "burst_pages_median": None,
        "burst_period_s": None}


def test_writeback_stalls_need_the_vmstat_keys(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 100, 0, 90) + dirtier_lru(11, 100, 0, 90),
              [("neighbour", 10, 11)])
    assert "writeback_stalls" not in run.summarise(tmp_path)


def test_the_sticks_bdi_state_is_taken_at_the_measured_phase(tmp_path):
    write_run(tmp_path, dirtier_lru(10, 100, 0, 90) + dirtier_lru(11, 100, 0, 90),
              [("ramp", 5, 9), ("neighbour", 10, 11)])
    (tmp_path / "bdi-stick.csv").write_text(
        "phase,event,uptime_s,key,value\n"
        "ramp,begin,5.0,BdiWriteBandwidth,102400\n"
        "neighbour,begin,10.0,BdiWriteBandwidth,76000\n"
        "neighbour,begin,10.0,BdiWriteback,400000\n"
        "neighbour,end,11.0,BdiWriteBandwidth,4096\n")
    s = run.summarise(tmp_path)
    assert s["stick_bdi"] == {"BdiWriteBandwidth": {"begin": 76000, "end": 4096},
                              "BdiWriteback": {"begin": 400000}}
    assert "begin 74.2 MiB/s, end 4.0 MiB/s" in run.format_summary(s)
    (tmp_path / "bdi-stick.csv").write_text("phase,event,uptime_s,key,value\nneighbour,end,1,x,y\n")
    with pytest.raises(run.RunError, match="bdi-stick.csv:2"):
        run.summarise(tmp_path)


def test_lock_contention_is_summed_per_phase_by_caller_and_through_the_unpark(tmp_path):
    p = tmp_path / "lock-contention.csv"
    p.write_text(
        "phase,contentions,stack\n"
        "ramp,50,queued_spin_lock_slowpath;_raw_spin_lock_irq;shrink_inactive_list\n"
        "neighbour,3,queued_spin_lock_slowpath;_raw_spin_lock_irqsave;folio_lruvec_lock_irqsave;"
        "folio_batch_move_lru;folio_rotate_immediate;folio_end_writeback\n"
        "neighbour,17,queued_spin_lock_slowpath;_raw_spin_lock_irq;shrink_inactive_list\n"
        "neighbour,2,queued_spin_lock_slowpath;_raw_spin_lock_irqsave;folio_lruvec_lock_irqsave;"
        "folio_batch_move_lru;lru_add_drain_cpu\n"
        "neighbour,4,(dropped: the hist table was full)\n")
    got = run.load_lock_contention(str(p), "neighbour")
    assert got == {"contentions": 22, "unpark": 3, "dropped": 4,
                   "by_caller": {"folio_batch_move_lru": 5, "shrink_inactive_list": 17}}
    assert run.load_lock_contention(str(tmp_path / "none.csv"), "neighbour") is None
