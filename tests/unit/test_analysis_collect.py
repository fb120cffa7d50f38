"""Loading the fixture runs (trimmed real runs, tests/fixtures/runs) and
the reasons runs are excluded.  Broken runs are made in tmp_path from
copies of the real ones; each test says what it changed."""
import os
import shutil

import pandas as pd
import pytest

from memcg_lab import collect, load, run

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")
DEFAULT_RUN = "dirty-neighbour/20261203T231532Z-default"
MGLRU = "dirty-neighbour/20261203T232812Z-mglru"   # real, but has no status.txt
SMOKE = "smoke/20261203T232633Z-vanilla"   # the old arm name: read as default
WRITEBACK_CP = "writeback-cp/20261204T010529Z-default"
PROACTIVE = "proactive/20261203T233444Z-default"


def copy_run(tmp_path, src, dest=None):
    path = tmp_path / (dest or src)
    shutil.copytree(os.path.join(FIXTURES, src), path)
    return path


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def report_texts(out, scenario, names):
    """Asserts that report folder out has each of names, non-empty, for
    scenario; returns the texts of its report.md and cover-letter.txt."""
    for name in names:
        assert os.path.getsize(os.path.join(out, scenario, name)) > 0, name
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    with open(os.path.join(out, "cover-letter.txt")) as f:
        cover = f.read()
    return md, cover


def reasons(tmp_path):
    d = collect.Dataset(tmp_path)
    return dict(zip(d.runs["run"], d.runs["reason"]))


def test_fixture_tree_loads_into_tidy_tables():
    d = collect.Dataset(FIXTURES)
    assert sorted(d.runs["run"]) == sorted([DEFAULT_RUN, MGLRU, SMOKE, WRITEBACK_CP, PROACTIVE])
    assert d.runs.set_index("run").loc[DEFAULT_RUN, "valid"]
    v = d.metrics[d.metrics["run"] == DEFAULT_RUN].set_index("metric")["value"]
    # the real run's summary.json: some.total 90722546 us over 111.93 s
    assert v["nb_psi_some_s"] == pytest.approx(90.722546)
    assert v["nb_psi_some_pct"] == pytest.approx(90.722546 / 111.93 * 100)
    assert v["probe_bursts"] == 12
    # the dirtier's samples nearest the phase (78.62, 190.55): 78.998 and
    # 190.998, just after the phase's end (run.delta)
    assert v["dirtier_efficiency_pct"] == pytest.approx(
        (144932 - 30117) / (31637404 - 849132) * 100)
    assert len(d.probe[d.probe["run"] == DEFAULT_RUN]) == 12
    assert set(d.fio[d.fio["run"] == DEFAULT_RUN]["job"]) == {"dirtier", "neighbour-read"}
    assert d.attribution.empty


def test_the_neighbour_s_work_counts_what_its_reader_read_in_the_phase(tmp_path):
    # The fixture predates neighbour-io.txt: its reads are fio's total,
    # the tail's included.
    p = copy_run(tmp_path, DEFAULT_RUN)
    fio = collect.Dataset(tmp_path).fio
    fio_mib = fio[(fio["job"] == "neighbour-read") & (fio["stat"] == "io_MiB")]["value_us"].iloc[0]

    def work():
        v = collect.Dataset(tmp_path).metrics.set_index("metric")["value"]
        return v["nb_work_mib"], v["nb_sys_ms_per_mib"] * v["nb_work_mib"]

    total, cpu_ms = work()
    (p / "neighbour-io.txt").write_text(f"rchar_at_phase_end={10 << 20}\n")
    # Without a neighbour-tail phase the neighbour ended as the runner
    # counted, and the count may have lost its exiting reader's rchar.
    assert work()[0] == pytest.approx(total)
    phases = (p / "phases.csv").read_text().splitlines()
    (p / "phases.csv").write_text("\n".join(phases[:2] + ["neighbour-tail,190.60,193.90"]
                                            + phases[2:]) + "\n")
    in_phase, cpu_ms_now = work()
    assert in_phase == pytest.approx(total - fio_mib + 10)
    assert cpu_ms_now == pytest.approx(cpu_ms)
    # A neighbour done before the phase's end read everything in it.
    (p / "neighbour-io.txt").write_text("finished_in_phase=1\n")
    assert work()[0] == pytest.approx(total)
    (p / "neighbour-io.txt").write_text("rchar_at_phase_end=lots\n")
    assert "not a byte count" in reasons(tmp_path)[DEFAULT_RUN]


def test_the_neighbour_s_major_faults_are_a_metric_where_sampled(tmp_path):
    # The fixture was trimmed before memory.stat pgmajfault was read: no
    # value, not zero; with the samples nearest the phase (78.998 and
    # 190.998, as above), their difference.
    p = copy_run(tmp_path, DEFAULT_RUN)
    assert "nb_pgmajfault" not in set(collect.Dataset(tmp_path).metrics["metric"])
    with open(p / "samples.csv", "a") as f:
        for t, n in ((77.998, 90), (78.998, 100), (190.998, 350)):
            f.write(f"{t},lab.slice/neighbour.scope,memory.stat.pgmajfault,{n}\n")
    assert collect.Dataset(tmp_path).metrics.set_index("metric")["value"]["nb_pgmajfault"] == 250


def metrics_with_throttle(tmp_path, run_dir, csv_text):
    """The metrics of the run at run_dir once it has this reclaim-throttle.csv."""
    (run_dir / "reclaim-throttle.csv").write_text(csv_text)
    return collect.Dataset(tmp_path).metrics.set_index("metric")["value"]


def test_reclaim_throttle_sleeps_are_metrics_where_recorded(tmp_path):
    # The fixture predates reclaim-throttle.csv: no value, not zero.
    p = copy_run(tmp_path, DEFAULT_RUN)
    d = collect.Dataset(tmp_path)
    v = d.metrics.set_index("metric")["value"]
    assert "throttled_s" not in v.index and "throttled_writeback_s" not in v.index
    v = metrics_with_throttle(
        tmp_path, p,
        "phase,reason,comm,pid,sleeps,delayed_us\n"
        "neighbour,writeback,lab-mmap-probe,300,3,300000\n"
        "neighbour,congested,fio,280,7,7000\n"
        "ramp,writeback,fio,280,9,900000\n")
    assert v["throttled_s"] == pytest.approx(0.307)
    assert v["throttled_writeback_s"] == pytest.approx(0.3)
    assert v["throttled_congested_s"] == pytest.approx(0.007)
    # Without the cgroup column, nobody's parked waits can be told apart.
    assert "nb_throttled_parked_s" not in v.index


def test_parked_waits_are_metrics_per_reason_and_cgroup(tmp_path):
    v = metrics_with_throttle(
        tmp_path, copy_run(tmp_path, DEFAULT_RUN),
        "phase,reason,comm,pid,sleeps,delayed_us,cgroup\n"
        "neighbour,parked,lab-mmap-probe,300,2,1800000,lab.slice/neighbour.scope\n"
        "neighbour,parked,fio,280,5,4500000,lab.slice/dirtier.scope\n"
        "neighbour,congested,fio,280,7,7000,lab.slice/dirtier.scope\n")
    assert v["throttled_parked_s"] == pytest.approx(6.3)
    assert v["nb_throttled_parked_s"] == pytest.approx(1.8)
    assert v["dirtier_throttled_parked_s"] == pytest.approx(4.5)
    assert v["nb_throttled_s"] == pytest.approx(1.8)


def test_run_without_status_is_incomplete():
    assert reasons(FIXTURES)[MGLRU].startswith("incomplete: status.txt missing")


def test_fio_report_after_signal_lines_is_parsed():
    # the real mglru fio-dirtier.json starts with "fio: terminating on signal 2"
    r = load.Run(os.path.join(FIXTURES, MGLRU))
    assert open(r.file("fio-dirtier.json")).read().startswith("\nfio: terminating")
    f = r.fio()
    assert len(f[(f["job"] == "dirtier") & (f["stat"] == "p50")]) == 1


def write_oom_kills(path, start, end):
    """Synthetic: vmstat-start.txt and vmstat-end.txt with these oom_kill
    counts (the fixture runs predate the files)."""
    (path / "vmstat-start.txt").write_text(f"nr_free_pages 1000\noom_kill {start}\n")
    (path / "vmstat-end.txt").write_text(f"nr_free_pages 900\noom_kill {end}\n")


def test_a_writer_killed_while_stopped_keeps_the_run_and_fails_a_guard(tmp_path):
    """Seen on mglru (3 of 5 runs, 7 December): the memcg OOM killer took
    the dirtier's fio after the phase, while it was being stopped, so its
    report holds fio's 'terminating' lines alone.  The phase was measured
    whole: the run stays valid, the dirtier's bandwidth is unknown, and
    the whole run's OOM kills say why."""
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "fio-dirtier.json").write_text("\nfio: terminating on signal 15\n\n"
                                        "fio: terminating on signal 2\n")
    write_oom_kills(p, 3, 4)
    d = collect.Dataset(tmp_path)
    row = d.runs.set_index("run").loc[DEFAULT_RUN]
    assert row["valid"], row["reason"]
    assert row["run_oom_kills"] == 1
    assert row["slice_oom_kills"] == 0
    assert pd.isna(row["dirtier_write_MiBps"])
    assert row["nb_system_s"] > 0


def test_a_fio_report_with_no_json_for_another_reason_is_unreadable(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "fio-dirtier.json").write_text("fio: pid=123, err=5/file:io_u.c:1889, func=io_u error\n")
    assert "no JSON object" in reasons(tmp_path)[DEFAULT_RUN]


def test_run_oom_kills_are_the_whole_runs_and_absent_without_both_files(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    assert run.load_run_oom_kills(str(p)) is None
    write_oom_kills(p, 0, 2)
    assert run.load_run_oom_kills(str(p)) == 2
    (p / "vmstat-end.txt").unlink()
    assert run.load_run_oom_kills(str(p)) is None


def test_failed_run_is_excluded_with_its_reason(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "status.txt").write_text("result=failed\nreason=guest hang: no console output for 180 s\n")
    assert reasons(tmp_path)[DEFAULT_RUN] == "failed: result=failed guest hang: no console output for 180 s"


def test_missing_samples_is_incomplete(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "samples.csv").unlink()
    assert reasons(tmp_path)[DEFAULT_RUN] == "incomplete: missing samples.csv"


def test_broken_samples_are_unreadable(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    with open(p / "samples.csv", "a") as f:
        f.write("1,2,3\n")
    assert "unreadable:" in reasons(tmp_path)[DEFAULT_RUN]
    assert "expected 4 fields" in reasons(tmp_path)[DEFAULT_RUN]


def test_failed_precondition_is_excluded(tmp_path):
    # transform: the dirtier's file_writeback samples set to 0
    p = copy_run(tmp_path, DEFAULT_RUN)
    zero_dirtier_writeback(p)
    assert reasons(tmp_path)[DEFAULT_RUN] == ("precondition not met: dirtier writeback share "
                                         "of file LRU median 0.0% < 80%")


def zero_dirtier_writeback(path):
    lines = (path / "samples.csv").read_text().splitlines()
    out = [",".join(l.split(",")[:3] + ["0"]) if ",memory.stat.file_writeback," in l else l
           for l in lines]
    (path / "samples.csv").write_text("\n".join(out) + "\n")


def test_precondition_is_not_held_against_the_immediate_arm(tmp_path):
    # transform: relabelled as an immediate run, writeback samples set to 0
    name = "dirty-neighbour/20261203T231532Z-immediate"
    p = copy_run(tmp_path, DEFAULT_RUN, name)
    edit(p / "provenance.txt", "arm=default", "arm=immediate")
    edit(p / "params-resolved.env", "ARM=default", "ARM=immediate")
    zero_dirtier_writeback(p)
    assert run.summarise(p)["precondition"]["met"] is False   # still reported
    row = collect.Dataset(tmp_path).runs.set_index("run").loc[name]
    assert row["valid"]
    assert row["reason"] == ""


def test_folder_and_provenance_arms_must_agree(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN, "dirty-neighbour/20261203T231532Z-keep")
    assert "mislabelled: folder says arm keep" in reasons(tmp_path)[
        "dirty-neighbour/20261203T231532Z-keep"]
    assert p.exists()


def test_odd_kernel_build_id_in_an_arm_is_excluded(tmp_path):
    # three copies of the real default run; the third claims another kernel
    for n in ("", ".2", ".3"):
        copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + n)
    (tmp_path / (DEFAULT_RUN + ".3") / "kernel-build-id.txt").write_text("deadbeef\n")
    r = reasons(tmp_path)
    assert r[DEFAULT_RUN] == "" and r[DEFAULT_RUN + ".2"] == ""
    assert r[DEFAULT_RUN + ".3"].startswith("mixed arm: kernel build id deadbeef differs")


def test_runs_from_before_the_tsc_fix_are_kept_apart(tmp_path):
    # The fixture runs predate host_tsc_khz (jiffies clocks); a newer run
    # in the same arm is the odd one out.
    for n in ("", ".2", ".3"):
        copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + n)
    with open(tmp_path / (DEFAULT_RUN + ".3") / "provenance.txt", "a") as f:
        f.write("host_tsc_khz=2596128\n")
    r = reasons(tmp_path)
    assert r[DEFAULT_RUN] == "" and r[DEFAULT_RUN + ".2"] == ""
    assert r[DEFAULT_RUN + ".3"].startswith("mixed arm: guest TSC kHz (host_tsc_khz) 2596128 differs")


@pytest.mark.parametrize("key,value,what", [
    ("accel", "tcg,thread=single", "accelerator"),
    ("host_cpu", "AMD EPYC 7B13", "host CPU")])
def test_runs_of_another_accelerator_or_host_cpu_are_not_averaged_in(tmp_path, key, value,
                                                                     what):
    for n in ("", ".2", ".3"):
        copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + n)
        with open(tmp_path / (DEFAULT_RUN + n) / "provenance.txt", "a") as f:
            f.write(f"{key}={value if n == '.3' else 'x'}\n")
    r = reasons(tmp_path)
    assert r[DEFAULT_RUN] == "" and r[DEFAULT_RUN + ".2"] == ""
    assert r[DEFAULT_RUN + ".3"].startswith(f"mixed arm: {what} {value} differs from the arm's x")


def test_build_ids_without_majority_exclude_the_arm(tmp_path):
    copy_run(tmp_path, DEFAULT_RUN)
    copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + ".2")
    (tmp_path / (DEFAULT_RUN + ".2") / "kernel-build-id.txt").write_text("deadbeef\n")
    assert all("no majority" in v for v in reasons(tmp_path).values())


def test_odd_parameters_in_an_arm_are_excluded(tmp_path):
    for n in ("", ".2", ".3"):
        copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + n)
    edit(tmp_path / (DEFAULT_RUN + ".2") / "params-resolved.env", "PARENT_MAX_MB=592", "PARENT_MAX_MB=600")
    r = reasons(tmp_path)
    assert "PARENT_MAX_MB=600" in r[DEFAULT_RUN + ".2"]
    assert r[DEFAULT_RUN] == "" and r[DEFAULT_RUN + ".3"] == ""


def test_lab_plumbing_parameters_do_not_split_an_arm(tmp_path):
    copy_run(tmp_path, DEFAULT_RUN)
    copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + ".2")
    with open(tmp_path / (DEFAULT_RUN + ".2") / "params-resolved.env", "a") as f:
        f.write("SCENARIO_DIR=/lab\nFUNCNAME=([0]=x)\n")
    assert set(reasons(tmp_path).values()) == {""}


def test_a_run_with_declared_parameters_only_joins_an_arm_of_older_runs(tmp_path):
    # The fixture is from before write_parameters: it also holds bash's
    # and the runner's variables, which a newer run no longer records.
    copy_run(tmp_path, DEFAULT_RUN)
    copy_run(tmp_path, DEFAULT_RUN, DEFAULT_RUN + ".2")
    newer = tmp_path / (DEFAULT_RUN + ".2") / "params-resolved.env"
    lines = newer.read_text().splitlines(keepends=True)
    kept = [line for line in lines if line.split("=", 1)[0] not in ("CGROOT", "SLICE", "OUT", "LAB")]
    assert len(kept) == len(lines) - 4
    newer.write_text("".join(kept))
    assert set(reasons(tmp_path).values()) == {""}


def test_arms_differing_in_parameters_get_a_note(tmp_path):
    copy_run(tmp_path, DEFAULT_RUN)
    p = copy_run(tmp_path, MGLRU)
    (p / "status.txt").write_text("result=ok\n")   # transform: the real run has none
    edit(p / "params-resolved.env", "PARENT_MAX_MB=592", "PARENT_MAX_MB=600")
    d = collect.Dataset(tmp_path)
    assert d.runs["valid"].all()
    assert any("PARENT_MAX_MB='592'/'600'" in n for n in d.notes["dirty-neighbour"])
    assert any("different lab git revisions" in n for n in d.notes["dirty-neighbour"])


def test_report_folders_are_not_runs(tmp_path):
    copy_run(tmp_path, SMOKE)
    (tmp_path / "report" / "20261203T000000Z-default").mkdir(parents=True)
    assert load.find_runs(tmp_path) == [str(tmp_path / SMOKE)]


def test_attribution_columns_are_checked(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "attribution.csv").write_text("reclaimer_cgroup,nr_scanned\nx,1\n")
    assert "missing columns" in reasons(tmp_path)[DEFAULT_RUN]
    with pytest.raises(run.RunError):
        load.Run(p).attribution()


def test_run_summary_cli_agrees_with_the_report(tmp_path):
    # lab/run-scenario.sh's call: run_summary.py RUN_DIR writes summary.json
    import json
    import subprocess
    import sys
    p = copy_run(tmp_path, DEFAULT_RUN)
    script = os.path.join(os.path.dirname(os.path.dirname(run.__file__)), "run_summary.py")
    done = subprocess.run([sys.executable, script, str(p)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    s = json.loads((p / "summary.json").read_text())
    assert s["precondition"]["met"] is True
    d = collect.Dataset(tmp_path)
    v = d.metrics.set_index("metric")["value"]
    assert v["nb_system_s"] * 1e6 == pytest.approx(
        s["counters"]["lab.slice/neighbour.scope:cpu.stat.system_usec"])
    assert v["probe_bursts"] == s["probe_latency_us"]["n"]


def test_run_in_progress_is_incomplete_not_unreadable(tmp_path):
    # a run the guest is still writing: no status.txt and no phases.csv yet
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "status.txt").unlink()
    (p / "phases.csv").unlink()
    assert reasons(tmp_path)[DEFAULT_RUN].startswith("incomplete: status.txt missing")


def test_attribution_in_lab_reclaim_attrib_format_is_loaded(tmp_path):
    # header and row shape of guest-rootfs/tools/lab-reclaim-attrib.c
    # (extra columns, reclaim_ns left empty); values made up for the test
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "attribution.csv").write_text(
        "reclaimer_cgroup,scanned_cgroup,target_cgroup,lru,nr_scanned,"
        "nr_reclaimed,nr_writeback,nr_immediate,events,reclaim_ns\n"
        "lab.slice/neighbour.scope,lab.slice/dirtier.scope,lab.slice,file,100,5,90,3,7,\n"
        "lab.slice/neighbour.scope,lab.slice/dirtier.scope,lab.slice,anon,20,1,0,0,2,\n")
    d = collect.Dataset(tmp_path)
    assert d.runs["valid"].all()
    a = d.attribution
    assert list(a["nr_scanned"]) == [100, 20] and a["reclaim_ns"].isna().all()


def test_a_run_whose_attribution_lost_events_is_excluded(tmp_path):
    p = copy_run(tmp_path, DEFAULT_RUN)
    (p / "attribution.csv").write_text(
        "reclaimer_cgroup,scanned_cgroup,nr_scanned,nr_reclaimed,reclaim_ns,events,"
        "target_cgroup,lru,nr_writeback,nr_immediate\n"
        "lab.slice/neighbour.scope,lab.slice/dirtier.scope,10,0,0,1,lab.slice,file,0,0\n")
    (p / "attribution.csv.pgscan").write_text("cgroup,pgscan_start,pgscan_end\n"
                                              "lab.slice/dirtier.scope,0,10\n")
    (p / "attribution.csv.meta").write_text("mode=patched\nsource=hist\nhist_dropped=3\n"
                                            "lost_rows=0\n")
    assert reasons(tmp_path)[DEFAULT_RUN] == "lossy attribution: hist_dropped=3 (attribution.csv.meta)"
    (p / "attribution.csv.meta").write_text("mode=patched\nsource=hist\nhist_dropped=0\n"
                                            "lost_rows=0\n")
    assert reasons(tmp_path)[DEFAULT_RUN] == ""


def test_global_reclaim_and_device_stalls_are_metrics(tmp_path):
    # The fixture has no vmstat rows: give it some at the phase's edges
    # (78.62, 190.55) and in between.
    p = copy_run(tmp_path, DEFAULT_RUN)
    rows = []
    for t, movable, normal, kswapd, written in [(78.7, 10, 1, 500, 0), (120.0, 20, 2, 900, 0),
                                                (130.0, 30, 2, 950, 0), (190.5, 40, 3, 1500, 800)]:
        rows += [f"{t},-,vmstat.allocstall_movable,{movable}", f"{t},-,vmstat.allocstall_normal,{normal}",
                 f"{t},-,vmstat.pgscan_kswapd,{kswapd}", f"{t},-,vmstat.nr_written,{written}",
                 f"{t},-,vmstat.nr_writeback,100"]
    with open(p / "samples.csv", "a") as f:
        f.write("\n".join(rows) + "\n")
    v = collect.Dataset(tmp_path).metrics
    v = v[v["run"] == DEFAULT_RUN].set_index("metric")["value"]
    assert v["vm_allocstall"] == (40 - 10) + (3 - 1)
    assert v["vm_pgscan_kswapd"] == 1000
    # nr_written still from 78.7 to 130.0 with writeback pending.
    assert v["stick_stall_max_s"] == pytest.approx(130.0 - 78.7)
