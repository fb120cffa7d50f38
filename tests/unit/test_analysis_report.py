"""make report's pieces on the fixture runs: the table layout, the
figures and the report folder.  Runs 2 and 3 of an arm are synthetic:
copies of the real fixture run whose neighbour counters are scaled by a
fixed factor (scale_neighbour), labelled by a .N folder suffix."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from memcg_lab import collect, notebook, plots, report, stats, tables
from test_analysis_collect import report_texts

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "runs")
ANALYSIS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "analysis")
DEFAULT_RUN = "dirty-neighbour/20261203T231532Z-default"
MGLRU = "dirty-neighbour/20261203T232812Z-mglru"


def scale_neighbour(path, factor):
    """Synthetic transform: the neighbour's PSI and CPU counters x factor."""
    lines = (path / "samples.csv").read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        t, cg, key, v = line.split(",")
        if cg == "lab.slice/neighbour.scope" and key.startswith(("memory.pressure", "cpu.stat")):
            v = repr(float(v) * factor)
        out.append(",".join([t, cg, key, v]))
    (path / "samples.csv").write_text("\n".join(out) + "\n")


@pytest.fixture
def results(tmp_path):
    """Three default and three mglru runs of dirty-neighbour."""
    for src in (DEFAULT_RUN, MGLRU):
        shutil.copytree(os.path.join(FIXTURES, src), tmp_path / src)
        for n, factor in ((".2", 1.1), (".3", 0.9)):
            shutil.copytree(os.path.join(FIXTURES, src), tmp_path / (src + n))
            scale_neighbour(tmp_path / (src + n), factor)
    for n in ("", ".2", ".3"):
        # the real mglru run has no status.txt (its host runner never wrote one)
        (tmp_path / (MGLRU + n) / "status.txt").write_text("result=ok\nreason=\n")
    return tmp_path


def test_synthetic_runs_scale_the_neighbour_cost(results):
    d = collect.Dataset(results)
    v = d.metrics[d.metrics["metric"] == "nb_psi_some_s"].set_index("run")["value"]
    assert v[DEFAULT_RUN + ".2"] == pytest.approx(v[DEFAULT_RUN] * 1.1)
    assert d.runs["valid"].all()


def test_mmtests_layout(results):
    d = collect.Dataset(results)
    c = stats.compare(d.metrics, ["default", "mglru"], "default")
    text = tables.compare_text(c, "dirty-neighbour").splitlines()
    assert text[0] == "dirty-neighbour: baseline default"
    header = next(i for i, l in enumerate(text) if l.split() == ["default", "mglru"])
    assert text[header + 1].split() == ["(3", "runs)", "(3", "runs)"]
    body = text[header + 2:]
    # per metric: Amean, Stddev, CoeffVar, Min, Max, Signif, in that order
    assert [l.split()[0] for l in body[:6]] == ["Amean", "Stddev", "CoeffVar", "Min", "Max", "Signif"]
    assert all("Neighbour PSI some (s)" in l for l in body[:6])
    # default mean of 90.72 * (1, 1.1, 0.9) = 90.72; mglru 57.72:
    # (90.722546 - 57.722333) / 90.722546 = 36.37% better
    amean = body[0]
    assert "90.72 (   0.00%)" in amean
    assert "57.72 *  36.37%*" in amean
    assert "disjoint" in body[5] and "p=0.00" in body[5]
    md = tables.compare_markdown(c, "dirty-neighbour").splitlines()
    assert md[2] == "| metric | default | mglru |"
    assert any(l.startswith("| Neighbour PSI some (s) | 90.72 ± 9.07 | 57.72 ± 5.77 (**+36.37%** ∅)")
               for l in md)


def test_percentile_table_layout(results):
    d = collect.Dataset(results)
    p = stats.latency_percentiles(d.probe, d.fio, ["default", "mglru"])
    text = tables.percentile_text(p).splitlines()
    assert text[1].split() == ["source", "arm", "n", "p50", "p90", "p99", "max"]
    probe = [l for l in text if l.startswith("probe fault latency") and "default" in l][0]
    # 3 copies of the real 12 bursts, sorted b0..b11 each three times:
    # p50 at 17.5 = (b5 + b6) / 2, p90 at 31.5 = b10, p99 at 34.65 = b11
    assert probe.split()[-5:] == ["36", "4575.80", "7045.93", "7178.91", "7178.91"]


def test_plots_are_written(results, tmp_path):
    d = collect.Dataset(results)
    files = plots.timeseries(d.loaded[DEFAULT_RUN], str(tmp_path / "ts"))
    files += plots.boxplots(d.metrics, ["default", "mglru"], ["nb_psi_some_s"], str(tmp_path / "box"))
    files += plots.latency_cdf(d.probe, ["default", "mglru"], str(tmp_path / "cdf"))
    assert sorted(os.path.basename(f) for f in files) == [
        "box.png", "box.svg", "cdf.png", "cdf.svg", "ts.png", "ts.svg"]
    for f in files:
        assert os.path.getsize(f) > 5000
    with open(files[0], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_attribution_heatmap(tmp_path):
    a = pd.DataFrame({"arm": "default", "reclaimer_cgroup": ["lab.slice/neighbour.scope"] * 2,
                      "scanned_cgroup": ["lab.slice/dirtier.scope", "lab.slice/neighbour.scope"],
                      "nr_scanned": [1000, 10], "nr_reclaimed": [5, 9], "reclaim_ns": [1, 2]})
    files = plots.attribution_heatmap(a, "default", str(tmp_path / "attr"))
    assert [os.path.getsize(f) > 0 for f in files] == [True, True]
    assert plots.attribution_heatmap(a, "mglru", str(tmp_path / "none")) == []


def test_the_heatmap_scale_shows_cells_three_orders_below_the_largest():
    norm = plots.heatmap_norm(np.array([[1e6, 1e3], [10, 0]]))
    assert norm(1e3) == pytest.approx(0.4)   # log10: (3 - 1) / (6 - 1); linear: 0.001
    assert norm(10) == pytest.approx(0.0)
    assert plots.heatmap_norm(np.array([[0.0]])) is None


def test_the_timeseries_draws_parked_pages_where_the_kernel_has_them(results, tmp_path):
    run_dir = results / DEFAULT_RUN
    lines = (run_dir / "samples.csv").read_text().splitlines()
    # a page parked at every sample: drawn, and too few to move the
    # precondition's share (parked folios count in the file LRU)
    parked = [l.split(",")[0] + ",lab.slice/dirtier.scope,memory.stat.immediate,4096"
              for l in lines if ",lab.slice/dirtier.scope,memory.stat.file_writeback," in l]
    (run_dir / "samples.csv").write_text("\n".join(lines + parked) + "\n")
    d = collect.Dataset(results)
    svg = [f for f in plots.timeseries(d.loaded[DEFAULT_RUN], str(tmp_path / "ts")) if f.endswith("svg")]
    assert "immediate" in open(svg[0]).read()
    plain = [f for f in plots.timeseries(d.loaded[DEFAULT_RUN + ".2"], str(tmp_path / "ts2"))
             if f.endswith("svg")]
    assert "immediate" not in open(plain[0]).read()


def test_arm_colours_are_fixed():
    assert plots.arm_colour("default") != plots.arm_colour("mglru")
    assert plots.arm_colour("somenewarm") == plots.arm_colour("somenewarm")


def test_a_cell_of_another_kernel_is_a_shade_of_its_arms_colour():
    """A report of lab:keep, lab:mglru and debian-6.12:mglru once drew
    keep and mglru alike (cells fell to the spare colours by name)."""
    keep, mglru = plots.arm_colour("keep"), plots.arm_colour("mglru")
    assert plots.arm_colour("lab:keep") == keep and plots.arm_colour("lab:mglru") == mglru
    other = plots.arm_colour("debian-6.12:mglru")
    assert other not in (keep, mglru, plots.arm_colour("lab:immediate"))
    assert other == plots.arm_colour("debian-6.12:mglru")


def test_report_folder(results):
    out, ds = report.build(str(results), "default", stamp="20261204T000000Z")
    assert out == os.path.join(str(results), "report", "20261204T000000Z")
    md, cover = report_texts(out, "dirty-neighbour", [
        "compare.txt", "compare.csv", "compare.md", "percentiles.csv",
        "timeseries-default.png", "timeseries-mglru.svg", "neighbour-cost.png",
        "probe-latency-cdf.png", "fio-clat.png"])
    assert "attribution heat map: skipped" in md
    assert "6 run folders, 6 used, 0 excluded" in md
    assert "Amean     Neighbour PSI some (s)" in cover
    with pytest.raises(report.ReportError, match="never overwritten"):
        report.build(str(results), "default", stamp="20261204T000000Z")


def test_report_lists_excluded_runs(results):
    (results / (MGLRU + ".3") / "status.txt").write_text("result=failed\nreason=hard timeout\n")
    out, _ = report.build(str(results), "default", stamp="x")
    assert open(os.path.join(out, "excluded.txt")).read() == (
        f"{MGLRU}.3: failed: result=failed hard timeout\n")
    assert "(2 runs)" in open(os.path.join(out, "dirty-neighbour", "compare.txt")).read()
    assert "1 run(s) excluded" in open(os.path.join(out, "cover-letter.txt")).read()


def test_report_counts_runs_the_guest_kernel_failed(results):
    (results / (MGLRU + ".3") / "status.txt").write_text(
        "result=failed\nreason=kernel trouble on the console: int3: 0000 [#1] PREEMPT SMP\n"
        "failure_kind=kernel\nkernel_trouble=int3: 0000 [#1] PREEMPT SMP\n")
    (results / (MGLRU + ".2") / "status.txt").write_text(
        "result=failed\nreason=QEMU was killed from outside the lab (signal 9)\nfailure_kind=qemu\n")
    out, ds = report.build(str(results), "default", stamp="x")
    crashed = pd.read_csv(os.path.join(out, "kernel-failures.csv"))
    assert crashed.to_dict("records") == [{
        "scenario": "dirty-neighbour", "arm": "mglru", "runs": 3, "kernel_failed": 1,
        "emulator_failed": 0,
        "example": "failed: result=failed kernel trouble on the console: int3: 0000 [#1] PREEMPT SMP"}]
    md = open(os.path.join(out, "report.md")).read()
    assert "## Runs the guest kernel failed" in md
    assert "| dirty-neighbour | mglru | 3 | 1 | 0 |" in md
    assert "1 run(s) failed by the guest kernel, 0 by an emulator fault" in open(
        os.path.join(out, "cover-letter.txt")).read()


def test_report_counts_emulator_faults_apart_from_kernel_failures(results):
    (results / (MGLRU + ".3") / "status.txt").write_text(
        "result=failed\nreason=emulator fault: the vCPU ran an int3 where memory holds 66\n"
        "failure_kind=emulator\nkernel_trouble=int3: 0000 [#1] PREEMPT SMP\n")
    out, ds = report.build(str(results), "default", stamp="x")
    crashed = pd.read_csv(os.path.join(out, "kernel-failures.csv"))
    assert crashed[["arm", "runs", "kernel_failed", "emulator_failed"]].to_dict("records") == [
        {"arm": "mglru", "runs": 3, "kernel_failed": 0, "emulator_failed": 1}]
    assert "0 run(s) failed by the guest kernel, 1 by an emulator fault" in open(
        os.path.join(out, "cover-letter.txt")).read()


def test_headline_needs_a_floor_and_reports_excess_over_it(results):
    out, _ = report.build(str(results), "default", stamp="a")
    md = open(os.path.join(out, "report.md")).read()
    assert "headline: no valid pinned-floor runs, so no floor" in md
    # Synthetic floor: copies of the default run with the neighbour's CPU
    # at half its value, filed as pinned-floor runs.
    for n, factor in (("", 0.5), (".2", 0.4)):
        dest = results / ("pinned-floor/20261203T231532Z-default" + n)
        shutil.copytree(results / DEFAULT_RUN, dest)
        scale_neighbour(dest, factor)
        prov = (dest / "provenance.txt").read_text()
        (dest / "provenance.txt").write_text(prov.replace("scenario=dirty-neighbour",
                                                          "scenario=pinned-floor"))
    out, ds = report.build(str(results), "default", stamp="b")
    md = open(os.path.join(out, "report.md")).read()
    assert "### Headline: excess over the floor" in md
    head = pd.read_csv(os.path.join(out, "dirty-neighbour", "headline.csv"))
    cpu = head[head["cost"] == "CPU"].set_index("arm")
    assert cpu.loc["default", "reduction"] == pytest.approx(0.0)
    floor = ds.metrics[(ds.metrics["scenario"] == "pinned-floor")
                       & (ds.metrics["metric"] == "nb_sys_ms_per_mib")]["value"].mean()
    assert cpu.loc["mglru", "floor_mean"] == pytest.approx(floor)
    assert cpu.loc["mglru", "excess"] == pytest.approx(cpu.loc["mglru", "mean"] - floor)
    assert "headline: the neighbour's excess cost over pinned-floor" in open(
        os.path.join(out, "cover-letter.txt")).read()


def give_sampler_cost(results, run, params, pct, tail=""):
    with open(results / run / "params-resolved.env", "a") as f:
        f.write(params)
    (results / run / "sampler.log").write_text(
        f"lab-sampler: 900 ticks in 90.0 s, cpu 0.5 s (user 0.1, system 0.4), {pct}% of one CPU"
        f"{tail}\n")


def test_report_states_the_sampler_cost_per_interval(results):
    costs = {DEFAULT_RUN: 0.41, DEFAULT_RUN + ".2": 0.62, MGLRU: 0.08}
    for run, pct in costs.items():
        give_sampler_cost(results, run, f"SAMPLE_MS={1000 if run == MGLRU else 100}\n", pct)
    out, ds = report.build(str(results), "default", stamp="x")
    md = open(os.path.join(out, "report.md")).read()
    assert "- sampler cost at 100 ms: median 0.52%, max 0.62% of one CPU (2 run(s))" in md
    assert "- sampler cost at 1000 ms: median 0.08%, max 0.08% of one CPU (1 run(s))" in md
    assert ds.runs.set_index("run").loc[DEFAULT_RUN, "sampler_cpu_pct"] == 0.41


def test_report_states_the_sampler_cost_per_pair_of_intervals(results):
    for run, slow, pct in ((DEFAULT_RUN, 100, 0.9), (DEFAULT_RUN + ".2", 1000, 0.3),
                           (DEFAULT_RUN + ".3", 1000, 0.5)):
        give_sampler_cost(results, run, f"SAMPLE_MS=100\nSAMPLE_SLOW_MS={slow}\n", pct)
    out, ds = report.build(str(results), "default", stamp="x")
    md = open(os.path.join(out, "report.md")).read()
    assert "- sampler cost at 100 ms: median 0.90%, max 0.90% of one CPU (1 run(s))" in md
    assert ("- sampler cost at 100 ms (slow files 1000 ms): median 0.40%, max 0.50% of one CPU"
            " (2 run(s))") in md
    assert ds.runs.set_index("run").loc[DEFAULT_RUN + ".2", "sampler_slow_interval_ms"] == 1000


def test_report_keeps_runs_with_slow_cgroups_apart(results):
    # Runs from before -S read every cgroup at SAMPLE_MS: another row.
    for run, tail, pct in ((DEFAULT_RUN, "", 0.9),
                           (DEFAULT_RUN + ".2", ", 0 ticks missed, 2 of 4 cgroups slow, vmstat fast", 0.3),
                           (DEFAULT_RUN + ".3", ", 0 ticks missed, 2 of 4 cgroups slow, vmstat slow", 0.1)):
        give_sampler_cost(results, run, "SAMPLE_MS=100\nSAMPLE_SLOW_MS=1000\n", pct, tail)
    out, ds = report.build(str(results), "default", stamp="x")
    md = open(os.path.join(out, "report.md")).read()
    assert ("- sampler cost at 100 ms (slow files 1000 ms): median 0.90%, max 0.90% of one CPU"
            " (1 run(s))") in md
    assert ("- sampler cost at 100 ms (slow files, 2 cgroup(s) 1000 ms): median 0.30%,"
            " max 0.30% of one CPU (1 run(s))") in md
    assert ("- sampler cost at 100 ms (slow files, 2 cgroup(s), /proc/vmstat 1000 ms):"
            " median 0.10%, max 0.10% of one CPU (1 run(s))") in md


def test_missing_baseline_falls_back_with_a_note(results):
    out, _ = report.build(str(results), "immediate", stamp="x")
    md = open(os.path.join(out, "report.md")).read()
    assert "baseline arm immediate has no valid runs here; compared against default" in md


def test_cli_without_runs_fails_clearly(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ANALYSIS, "report.py"), str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "no run folders" in p.stderr


def test_cli_copies_each_scenarios_headline_figures_when_asked(results, tmp_path):
    """make report FIGURES=analysis/figures: the figures RESULTS.md
    shows, regenerated from the runs, named by scenario."""
    dest = tmp_path / "figures"
    p = subprocess.run([sys.executable, os.path.join(ANALYSIS, "report.py"), "--no-notebook",
                        "--figures", str(dest), str(results)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    figures = sorted(f"dirty-neighbour-{name}" for name in ("neighbour-cost.png",
                                                            "probe-latency-cdf.png"))
    data = sorted(f"dirty-neighbour-{name}" for name in ("runs.csv", "probe-latency.csv"))
    assert sorted(os.listdir(dest)) == sorted(figures + data)
    assert f"report: 2 figures copied to {dest}" in p.stdout
    assert f"report: 2 tables of per-run figures written to {dest}" in p.stdout
    assert all(os.path.getsize(dest / f) > 1000 for f in figures)
    # The numbers behind RESULTS.md's tables, without the cache's paths:
    # every run, its arm, provenance and metrics; every burst.
    runs = pd.read_csv(dest / "dirty-neighbour-runs.csv")
    assert "path" not in runs.columns
    assert sorted(runs["arm"].value_counts().items()) == [("default", 3), ("mglru", 3)]
    assert {"kernel_build_id", "git_revision", "nb_system_s", "nb_psi_some_s"} <= set(runs.columns)
    bursts = pd.read_csv(dest / "dirty-neighbour-probe-latency.csv")
    assert set(bursts["run"]) == set(runs["run"])
    assert (bursts["latency_us"] > 0).all()


def test_notebook_source_is_percent_format():
    cells = notebook.percent_cells(open(notebook.SOURCE).read())
    assert cells[0][0] == "markdown" and cells[0][1].startswith("# memcg-lab report")
    assert any(k == "code" and "MEMCG_LAB_REPORT" in s for k, s in cells)
    assert notebook.percent_cells("doc\n# %%\nx = 1\n# %% [markdown]\n# hi\n") == [
        ("code", "x = 1"), ("markdown", "hi")]
