"""memcg_lab.stats and the % convention of memcg_lab.metrics, against
values computed by hand."""
import math
import os

import pandas as pd
import pytest

from memcg_lab import load, metrics, run, stats

FIO_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "fixtures", "fio")


def table(values):
    """values: {(arm, metric): [per-run values]} as a Dataset.metrics table."""
    rows = [{"scenario": "s", "arm": arm, "run": f"{arm}/{i}", "metric": m, "value": v}
            for (arm, m), vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_describe_uses_the_sample_stddev():
    d = stats.describe([10, 12, 14])
    assert d["mean"] == 12
    assert d["stddev"] == pytest.approx(2.0)          # sqrt((4+0+4)/2)
    assert d["coeffvar"] == pytest.approx(100 / 6)    # 2/12
    assert (d["min"], d["max"], d["n"]) == (10, 14, 3)
    assert math.isnan(stats.describe([5])["stddev"])


def test_welch_matches_the_hand_computed_statistic():
    # se = sqrt(4/3 + 1/3); t = (12 - 6) / se; df = 2.94 -> p ~ 0.0196
    t, p = stats.welch([10, 12, 14], [5, 6, 7])
    assert t == pytest.approx(6 / math.sqrt(5 / 3))
    assert 0.015 < p < 0.025


def test_welch_needs_two_runs_and_some_variance():
    assert all(math.isnan(x) for x in stats.welch([1], [1, 2]))
    assert all(math.isnan(x) for x in stats.welch([3, 3], [3, 3]))


def test_ranges_overlap():
    assert stats.ranges_overlap([1, 3], [3, 5])
    assert not stats.ranges_overlap([1, 2], [2.5, 5])


def test_improvement_sign_follows_the_metric_direction():
    assert metrics.improvement_pct(10, 5, "lower") == 50
    assert metrics.improvement_pct(10, 15, "lower") == -50
    assert metrics.improvement_pct(10, 15, "higher") == 50
    assert metrics.improvement_pct(0, 0, "lower") == 0
    assert metrics.improvement_pct(0, 1, "lower") is None


def test_compare_against_the_baseline():
    t = table({("default", "nb_psi_some_s"): [10, 12, 14], ("mglru", "nb_psi_some_s"): [5, 6, 7],
               ("default", "nb_read_MiBps"): [2, 3, 4], ("mglru", "nb_read_MiBps"): [3, 4, 5]})
    c = stats.compare(t, ["default", "mglru"], "default").set_index(["metric", "arm"])
    psi = c.loc[("nb_psi_some_s", "mglru")]
    assert psi["pct_mean"] == pytest.approx(50)       # (12 - 6) / 12, lower is better
    assert psi["pct_stddev"] == pytest.approx(50)     # (2 - 1) / 2
    assert psi["pct_coeffvar"] == pytest.approx(0)    # both 1/6
    assert psi["significant"] and psi["ranges_overlap"] is False
    read = c.loc[("nb_read_MiBps", "mglru")]
    assert read["pct_mean"] == pytest.approx(100 / 3)  # (4 - 3) / 3, higher is better
    assert not read["significant"] and read["ranges_overlap"] is True
    assert read["welch_p"] == pytest.approx(0.2879, abs=1e-4)
    base = c.loc[("nb_psi_some_s", "default")]
    assert base["pct_mean"] == 0 and math.isnan(base["welch_p"])
    # metrics without any value are left out rather than shown as n/a rows
    assert set(c.index.get_level_values("metric")) == {"nb_psi_some_s", "nb_read_MiBps"}


def test_compare_refuses_a_baseline_without_runs():
    t = table({("mglru", "nb_psi_some_s"): [1, 2]})
    with pytest.raises(ValueError, match="baseline arm 'default' has no valid runs"):
        stats.compare(t, ["mglru"], "default")


def test_latency_percentiles_pool_probe_bursts_and_average_fio_runs():
    probe = pd.DataFrame({"arm": "a", "run": ["r1"] * 3 + ["r2"] * 2,
                          "latency_us": [1000, 2000, 3000, 4000, 5000]})
    fio = pd.DataFrame([{"arm": "a", "run": r, "job": "j", "direction": "read",
                         "stat": s, "value_us": v * k}
                        for r, k in [("r1", 1), ("r2", 3)]
                        for s, v in [("p50", 1000), ("p90", 2000), ("p99", 3000), ("max", 4000)]])
    p = stats.latency_percentiles(probe, fio, ["a"]).set_index("source")
    pr = p.loc["probe fault latency (pooled bursts)"]
    assert pr["n"] == 5
    assert (pr["p50"], pr["p90"], pr["max"]) == pytest.approx((3.0, 4.6, 5.0))  # ms
    f = p.loc["fio j read clat (mean of per-run percentiles: no json+ bins)"]
    assert (f["n"], f["p50"], f["max"]) == (2, 2.0, 8.0)  # mean of 1 and 3 ms; 4 and 12 ms


def test_fio_percentiles_come_from_the_runs_histograms_pooled():
    # r1: 90 reads at 1 ms, 10 at 100 ms; r2: 100 at 2 ms.  Pooled: 200
    # reads, p50 2 ms, p90 2 ms (180th), p99 100 ms; a mean of the runs'
    # p99s would be 51 ms, a latency no read had.
    fio = pd.DataFrame([{"arm": "a", "run": r, "job": "j", "direction": "read",
                         "stat": s, "value_us": v}
                        for r, p99 in [("r1", 100000), ("r2", 2000)]
                        for s, v in [("p50", 1000), ("p90", 1000), ("p99", p99),
                                     ("max", p99)]])
    bins = pd.DataFrame([{"arm": "a", "run": r, "job": "j", "direction": "read",
                          "lat_us": lat, "count": n}
                         for r, lat, n in [("r1", 1000, 90), ("r1", 100000, 10), ("r2", 2000, 100)]])
    p = stats.latency_percentiles(pd.DataFrame(columns=["arm", "latency_us"]), fio, ["a"],
                                  bins).set_index("source")
    f = p.loc["fio j read clat (pooled, 2 runs)"]
    assert (f["n"], f["p50"], f["p90"], f["p99"], f["max"]) == (200, 2.0, 2.0, 100.0, 100.0)
    # an arm with one run lacking bins falls back, and says so
    p = stats.latency_percentiles(pd.DataFrame(columns=["arm", "latency_us"]), fio, ["a"],
                                  bins[bins["run"] == "r1"]).set_index("source")
    assert "fio j read clat (mean of per-run percentiles: no json+ bins)" in p.index


def test_binned_percentiles_reproduce_fios_own_on_a_real_report():
    report = load.load_fio(os.path.join(FIO_FIXTURES, "neighbour-read-jsonplus.json"))
    rows = pd.DataFrame(load.fio_clat_bins(report, "neighbour"))
    clat = report["jobs"][0]["read"]["clat_ns"]
    assert rows["count"].sum() == clat["N"]
    assert set(rows["direction"]) == {"read"}
    for q, want_ns in clat["percentile"].items():
        got = stats.binned_percentile(rows["lat_us"], rows["count"], float(q))
        assert got == want_ns / 1e3


def test_share_while_probing_uses_the_samples_inside_the_probe_window():
    # bursts at 0.5 s (0.5 s long) and 2.0 s (1.2 s long): window [0.5, 3.2];
    # samples inside at 1, 2, 3 s: (2.5e6 - 1e6) us over 2 s = 75 %
    probe = pd.DataFrame({"start_s": [0.5, 2.0], "latency_us": [0.5e6, 1.2e6]})
    assert metrics.probe_window(probe) == (0.5, 3.2)
    series = pd.Series([0, 1e6, 2e6, 2.5e6, 10e6], index=[0.0, 1.0, 2.0, 3.0, 4.0])
    cgroups = run.Cgroups("lab.slice", ["lab.slice/dirtier.scope"], "lab.slice/neighbour.scope")
    m = metrics.window_metrics(lambda cg, key: series, probe, cgroups)
    assert m["nb_psi_some_probe_pct"] == pytest.approx(75)
    assert m["nb_system_probe_pct"] == pytest.approx(75)
    empty = pd.DataFrame({"start_s": [], "latency_us": []})
    assert metrics.window_metrics(lambda cg, key: series, empty,
                                  cgroups)["nb_psi_some_probe_pct"] is None


def test_headline_is_the_excess_over_the_floor_relative_to_the_baseline():
    # floor 2 ms/MiB; activate 10 (excess 8), immediate 4 (excess 2): 1 - 2/8
    t = table({("activate", "nb_sys_ms_per_mib"): [9, 10, 11],
               ("immediate", "nb_sys_ms_per_mib"): [3, 4, 5]})
    floor = table({("activate", "nb_sys_ms_per_mib"): [1.5, 2, 2.5]})
    h = stats.headline(t, floor, ["activate", "immediate"], "activate").set_index(["cost", "arm"])
    imm = h.loc[("CPU", "immediate")]
    assert (imm["excess"], imm["floor_mean"], imm["runs"], imm["floor_runs"]) == (2, 2, 3, 3)
    assert imm["reduction"] == pytest.approx(0.75)
    assert imm["ci_low"] < 0.75 < imm["ci_high"] and imm["ci_high"] <= 1.0
    base = h.loc[("CPU", "activate")]
    assert base["reduction"] == pytest.approx(0.0)
    # the same runs give the same interval
    again = stats.headline(t, floor, ["activate", "immediate"], "activate")
    assert again.set_index(["cost", "arm"]).loc[("CPU", "immediate"), "ci_low"] == imm["ci_low"]
    # no stall metric in these runs: no stall rows
    assert "stall" not in h.index.get_level_values("cost")


def test_headline_without_baseline_excess_or_enough_runs_says_nothing():
    t = table({("activate", "nb_sys_ms_per_mib"): [2.0], ("immediate", "nb_sys_ms_per_mib"): [3.0]})
    floor = table({("activate", "nb_sys_ms_per_mib"): [2.0, 2.0]})
    h = stats.headline(t, floor, ["activate", "immediate"], "activate").set_index("arm")
    assert h.loc["immediate", "reduction"] is None       # the baseline has no excess
    assert h.loc["immediate", "ci_low"] is None


def test_guards_count_the_runs_that_break_them():
    t = table({("immediate", "slice_oom_kills"): [0, 1, 0],
               ("immediate", "dirtier_of_stick_pct"): [99, 90, 97]})
    g = stats.guards(t, ["immediate"]).set_index("guard")
    assert g.loc["no OOM kill under the parent", "failed"] == 1
    assert g.loc["the stick writes >= 0.95x its rate", "failed"] == 1
    assert g.loc["the stick writes >= 0.95x its rate", "worst"] == 90
