"""The probe's latency histogram (probe-histogram.csv, lab-mmap-probe -H)
in the analysis.  No real run has one yet: the tests derive it from the
fixture run's real probe-latency.csv with the probe's bucketing (bucket
k = [2^(k-1), 2^k) us, written from 0 up to the highest non-empty one),
so its counts are the run's 12 real bursts."""
import csv
import os

import pytest

from memcg_lab import collect, load, report, run, stats, tables
from test_analysis_collect import MGLRU, DEFAULT_RUN, copy_run, reasons, report_texts


def derive_histogram(path):
    """probe-histogram.csv as lab-mmap-probe -H writes it, from the run's
    probe-latency.csv."""
    with open(path / "probe-latency.csv", newline="") as f:
        buckets = [int(r["latency_us"]).bit_length() for r in csv.DictReader(f)]
    rows = ["bucket_lo_us,bucket_hi_us,count"]
    rows += [f"{1 << k >> 1},{1 << k},{buckets.count(k)}" for k in range(max(buckets) + 1)]
    (path / "probe-histogram.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture
def results(tmp_path):
    """Two default runs with a histogram (the real run and a copy), one
    mglru run without (the real one, given a status.txt)."""
    for dest in (DEFAULT_RUN, DEFAULT_RUN + ".2"):
        derive_histogram(copy_run(tmp_path, DEFAULT_RUN, dest))
    (copy_run(tmp_path, MGLRU) / "status.txt").write_text("result=ok\nreason=\n")
    return tmp_path


def test_derived_histogram_has_the_real_bursts(results):
    h = load.Run(results / DEFAULT_RUN).probe_histogram()
    assert len(h) == 24 and h["count"].sum() == 12
    # 2571609, 3361489 and 3457474 us in [2^21, 2^22); the other nine above
    nonempty = h[h["count"] > 0].to_dict("records")
    assert nonempty == [{"bucket_lo_us": 2097152, "bucket_hi_us": 4194304, "count": 3},
                        {"bucket_lo_us": 4194304, "bucket_hi_us": 8388608, "count": 9}]


def test_runs_without_a_histogram_still_load(results):
    d = collect.Dataset(results)
    assert d.runs["valid"].all()
    assert set(d.probe_histogram["run"]) == {DEFAULT_RUN, DEFAULT_RUN + ".2"}
    assert len(d.probe[d.probe["arm"] == "mglru"]) > 0


def test_pooled_histogram_sums_runs_over_the_used_buckets(results):
    d = collect.Dataset(results)
    t = stats.pooled_histogram(d.probe_histogram, ["default", "mglru"])
    assert list(t["arm"].unique()) == ["default"]
    assert list(zip(t["bucket_lo_us"], t["count"])) == [(2097152, 6), (4194304, 18)]
    assert list(t["share_pct"]) == pytest.approx([25.0, 75.0])
    text = tables.histogram_text(t).splitlines()
    assert text[1].split() == ["latency", "(us)", "default"]
    assert text[2].split() == ["[2097152,", "4194304)", "6", "(25.0%)"]
    assert text[-1].split() == ["bursts", "24"]
    md = tables.histogram_markdown(t).splitlines()
    assert "| [4194304, 8388608) | 18 (75.0%) |" in md


def test_pooled_histogram_keeps_empty_buckets_between_used_ones(results):
    # made up: a third default run with one 10 us burst
    p = copy_run(results, DEFAULT_RUN, DEFAULT_RUN + ".3")
    (p / "probe-histogram.csv").write_text(
        "bucket_lo_us,bucket_hi_us,count\n0,1,0\n1,2,0\n2,4,0\n4,8,0\n8,16,1\n")
    t = stats.pooled_histogram(collect.Dataset(results).probe_histogram, ["default"])
    lo = list(t["bucket_lo_us"])
    assert lo[0] == 8 and lo[-1] == 4194304 and len(lo) == 20
    assert all(b == 2 * a for a, b in zip(lo, lo[1:]))
    assert t["count"].sum() == 25


def test_a_broken_histogram_makes_the_run_unreadable(results):
    path = results / DEFAULT_RUN / "probe-histogram.csv"
    path.write_text("bucket_lo_us,bucket_hi_us,count\n0,1,0\n2,4,5\n")
    assert reasons(results)[DEFAULT_RUN] == (
        f"unreadable: {path}: buckets are not contiguous [lo, hi) ranges with counts")
    path.write_text("bucket_lo_us,bucket_hi_us,count\n0,1,x\n")
    with pytest.raises(run.RunError, match="whole numbers"):
        load.Run(results / DEFAULT_RUN).probe_histogram()
    path.write_text("bucket_lo_us,count\n0,1\n")
    with pytest.raises(run.RunError, match=r"missing columns \['bucket_hi_us'\]"):
        load.Run(results / DEFAULT_RUN).probe_histogram()


def test_report_has_the_histogram_table_and_figure(results):
    out, _ = report.build(str(results), "default", stamp="x")
    md, cover = report_texts(out, "dirty-neighbour", [
        "probe-histogram.csv", "probe-histogram.txt", "probe-histogram.md",
        "probe-histogram.png", "probe-histogram.svg"])
    assert "| [2097152, 4194304) | 6 (25.0%) |" in md
    assert "![probe-histogram.png](dirty-neighbour/probe-histogram.png)" in md
    assert "probe fault latency histogram" in cover


def test_report_without_histograms_has_no_histogram_files(tmp_path):
    copy_run(tmp_path, DEFAULT_RUN)
    out, _ = report.build(str(tmp_path), "default", stamp="x")
    assert not [f for f in os.listdir(os.path.join(out, "dirty-neighbour"))
                if f.startswith("probe-histogram")]
