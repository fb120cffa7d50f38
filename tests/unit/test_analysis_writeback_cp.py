"""The writeback-cp scenario's cover-letter table on the trimmed real run
tests/fixtures/runs/writeback-cp/20261204T010529Z-default (2 iterations,
lab kernel, default arm).  A second arm is a labelled synthetic copy of
it (as_arm): its alloc times halved and its series counters made "na",
as a kernel without the patch series writes them."""
import math
import os

import pytest

from memcg_lab import collect, load, report, stats, tables, writeback_cp
from test_analysis_collect import (FIXTURES, DEFAULT_RUN, WRITEBACK_CP, copy_run, reasons,
                                   report_texts)


def as_arm(results, arm, transform):
    """A copy of the real run labelled arm, writeback-cp.csv rows passed
    through transform(dict of column -> value) (header order kept)."""
    p = copy_run(results, WRITEBACK_CP, WRITEBACK_CP.replace("-default", f"-{arm}"))
    for name in ("provenance.txt", "params-resolved.env"):
        text = (p / name).read_text()
        (p / name).write_text(text.replace("arm=default", f"arm={arm}")
                              .replace("ARM=default", f"ARM={arm}"))
    lines = (p / "writeback-cp.csv").read_text().splitlines()
    header = lines[0].split(",")
    out = [lines[0]]
    for line in lines[1:]:
        values = line.split(",")
        # positions, not names: the header repeats some names
        out.append(",".join(transform(list(zip(header, values)))))
    (p / "writeback-cp.csv").write_text("\n".join(out) + "\n")
    return p


def halve_times_drop_series(pairs):
    out = []
    for name, v in pairs:
        if name in ("elapsed_s", "sys_s", "user_s"):
            v = repr(float(v) / 2)
        elif name in ("pgrescued", "pgimmediate_parked"):
            v = "na"
        out.append(v)
    return out


@pytest.fixture
def results(tmp_path):
    copy_run(tmp_path, WRITEBACK_CP)
    as_arm(tmp_path, "keep", halve_times_drop_series)
    return tmp_path


def cell(table, section, label, arm, col="mean"):
    t = table[(table["section"] == section) & (table["label"] == label) & (table["arm"] == arm)]
    assert len(t) == 1, (section, label, arm)
    return t[col].iloc[0]


def test_repeated_names_keep_both_windows_and_not_available_is_nan():
    f = load.Run(os.path.join(FIXTURES, WRITEBACK_CP)).writeback_cp()
    assert list(f["iteration"]) == [1, 2]
    # lab-alloc's compact_stall and the scenario's vmstat delta of it
    assert "compact_stall" in f and "vmstat.compact_stall" in f
    assert "vmstat.thp_fault_alloc" in f and "vmstat.pgscan_direct" in f
    assert list(f["vmstat.pgscan_direct"]) == [0, 3818852]
    assert list(f["thp_fault_alloc"]) == [49, 23]
    # lab-alloc wrote "not available" (its THP lookup before 81d71eb)
    assert f["anon_huge_kb"].isna().all()


def test_cover_letter_figures_of_the_real_run():
    d = collect.Dataset(FIXTURES)
    it = d.writeback_cp[d.writeback_cp["scenario"] == "writeback-cp"]
    t = stats.writeback_cp(it, ["default"], "default")
    assert cell(t, "alloc", "System Time", "default") == pytest.approx((4.476319 + 6.759973) / 2)
    assert cell(t, "alloc", "Elapsed Time", "default", "stddev") == pytest.approx(
        abs(13.021021 - 5.402179) / math.sqrt(2))
    assert cell(t, "alloc", "Fault Fallback", "default") == 259
    assert cell(t, "alloc", "Elapsed Time", "default", "n") == 2
    assert math.isnan(cell(t, "alloc", "THP Active", "default"))
    assert cell(t, "alloc", "THP Active", "default", "n") == 0
    assert cell(t, "vmstat", "Direct pages scanned", "default") == 3818852 / 2
    assert cell(t, "vmstat", "Kswapd efficiency", "default") == pytest.approx(
        (159190 + 137697) / (225658 + 805317) * 100)
    # pages scanned per second of alloc: totals over totals
    assert cell(t, "vmstat", "Direct velocity", "default") == pytest.approx(
        3818852 / (5.402179 + 13.021021))
    assert cell(t, "vmstat", "Percentage direct scans", "default") == pytest.approx(
        3818852 / (3818852 + 225658 + 805317) * 100)
    assert cell(t, "vmstat", "Page reclaim immediate", "default") == 46
    assert cell(t, "vmstat", "Page rescued immediate", "default") == 0
    assert cell(t, "vmstat", "Compaction stalls", "default") == 0


def test_text_layout_follows_the_cover_letter(results):
    d = collect.Dataset(results)
    t = stats.writeback_cp(d.writeback_cp, ["default", "keep"], "default")
    text = tables.writeback_cp_text(t, "writeback-cp").splitlines()
    assert text[0] == "writeback-cp: the 2011 cover letter's table (writeback-cp.csv)"
    head = text.index(next(l for l in text if l.split() == ["default", "keep"]))
    body = text[head + 2:]
    assert [l.split("  ")[0] for l in body[:4]] == ["System Time (s)", "+/-", "User Time (s)", "+/-"]
    # keep's times are halved: 50% better, and so is their spread
    assert "2.81 (  50.00%)" in body[0] and "0.81 (  50.00%)" in body[1]
    thp = next(l for l in body if l.startswith("THP Active"))
    assert thp.split()[4:] == ["n/a", "(", "n/a", ")", "n/a", "(", "n/a", ")"]
    vm = text[text.index(next(l for l in text if l.startswith("vmstat, mean per iteration"))):]
    rescued = next(l for l in vm if l.startswith("Page rescued immediate"))
    # default's kernel has the counter (0); the synthetic keep's has not
    assert rescued.split()[-2:] == ["0.00", "n/a"]
    assert next(l for l in vm if l.startswith("Direct velocity")).split()[-2:] == [
        "207285", "414570"]
    md = tables.writeback_cp_markdown(t, "writeback-cp")
    assert "| Page rescued immediate (pages) | 0.00 | n/a |" in md
    assert "| System Time (s) | 5.62 (   0.00%) | 2.81 (  50.00%) |" in md


def test_report_has_the_table_only_where_runs_have_the_file(results):
    copy_run(results, DEFAULT_RUN)
    out, ds = report.build(str(results), "default", stamp="x")
    assert ds.runs["valid"].all()
    md, cover = report_texts(out, "writeback-cp",
                             ["writeback-cp.txt", "writeback-cp.md", "writeback-cp.csv"])
    assert not os.path.exists(os.path.join(out, "dirty-neighbour", "writeback-cp.txt"))
    assert "the 2011 cover letter's table" in md
    assert "| Direct velocity (pages/s) | 207285 | 414570 |" in md
    assert "vmstat, mean per iteration" in cover


def test_baseline_without_writeback_cp_rows_falls_back(results):
    t = stats.writeback_cp(collect.Dataset(results).writeback_cp, ["keep"], "keep")
    assert set(t["arm"]) == {"keep"}
    assert cell(t, "alloc", "System Time", "keep", "pct_mean") == 0


def test_a_broken_row_makes_the_run_unreadable(results):
    path = results / WRITEBACK_CP / "writeback-cp.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1], lines[2].rsplit(",", 1)[0]]) + "\n")
    assert reasons(results)[WRITEBACK_CP] == f"unreadable: {path}:3: expected 29 fields, got 28"
    path.write_text("\n".join([lines[0], lines[1].replace(",592,", ",lots,")]) + "\n")
    assert "could not convert string to float: 'lots'" in reasons(results)[WRITEBACK_CP]


def test_an_oom_killed_alloc_counts_and_keeps_its_iteration(results):
    """The guest writes an iteration whose lab-alloc the OOM killer ended
    as "na" alloc fields and the vmstat deltas, oom_kill among them."""
    p = results / WRITEBACK_CP
    lines = (p / "writeback-cp.csv").read_text().splitlines()
    header = lines[0].split(",")
    alloc = set(writeback_cp.ALLOC_KEYS)
    rows = [lines[0] + ",oom_kill"]
    for n, line in enumerate(lines[1:], start=1):
        values = line.split(",")
        if n == 2:
            # the first len(ALLOC_KEYS) names after "iteration" are lab-alloc's
            values = [v if i == 0 or i > len(alloc) else "na" for i, v in enumerate(values)]
        rows.append(",".join(values) + ("," + ("1" if n == 2 else "0")))
    (p / "writeback-cp.csv").write_text("\n".join(rows) + "\n")
    assert len(header) + 1 == len(rows[1].split(","))
    d = collect.Dataset(results)
    assert d.runs["valid"].all(), d.runs["reason"].tolist()
    t = stats.writeback_cp(d.writeback_cp, ["default", "keep"], "default")
    assert cell(t, "vmstat", "OOM kills", "default") == 0.5
    # the fixture's other arm has no oom_kill column: not available
    assert math.isnan(cell(t, "vmstat", "OOM kills", "keep"))
    # the OOM-killed iteration has no alloc time, the other one does
    assert cell(t, "alloc", "Elapsed Time", "default", "n") == 1
    assert cell(t, "vmstat", "Direct pages scanned", "default") == 3818852 / 2
    # velocity: the timed iteration's scans over its own alloc time only
    it = d.writeback_cp[d.writeback_cp["arm"] == "default"]
    timed = it[it["elapsed_s"].notna()]
    assert len(timed) == 1
    scans = timed.get("vmstat.pgscan_direct", timed.get("pgscan_direct")).iloc[0]
    assert cell(t, "vmstat", "Direct velocity", "default") == pytest.approx(
        scans / timed["elapsed_s"].iloc[0])


def test_reclaim_throttle_per_iteration_joins_the_table(results):
    # The fixture predates reclaim-throttle.csv: NaN, not zero.
    d = collect.Dataset(str(results))
    it = d.writeback_cp[d.writeback_cp["arm"] == "default"]
    t = stats.writeback_cp(it, ["default"], "default")
    assert math.isnan(cell(t, "vmstat", "Reclaim throttled (writeback), iteration", "default"))
    # With the hist: each iteration's phase, summed over tasks; a reason
    # without rows is zero; another phase does not count.
    (results / WRITEBACK_CP / "reclaim-throttle.csv").write_text(
        "phase,reason,comm,pid,sleeps,delayed_us\n"
        "iteration-1,writeback,lab-alloc,300,10,1000000\n"
        "iteration-1,writeback,kswapd0,41,2,200000\n"
        "iteration-2,writeback,lab-alloc,301,4,400000\n"
        "iteration-2,noprogress,lab-alloc,301,5,5000\n"
        "drain,writeback,sync,400,100,9000000\n")
    d = collect.Dataset(str(results))
    it = d.writeback_cp[d.writeback_cp["arm"] == "default"]
    t = stats.writeback_cp(it, ["default"], "default")
    assert cell(t, "vmstat", "Reclaim throttled (writeback), iteration", "default") == \
        pytest.approx((1.2 + 0.4) / 2)
    assert cell(t, "vmstat", "Reclaim throttled (noprogress), iteration", "default") == \
        pytest.approx(0.005 / 2)
    assert cell(t, "vmstat", "Reclaim throttled (congested), iteration", "default") == 0
