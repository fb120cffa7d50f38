"""The proactive scenario's per-arm table of memory.reclaim calls on the
trimmed real run tests/fixtures/runs/proactive/20261203T233444Z-default
(20 calls, all "ok").  Other runs are labelled edits of copies of it."""
import os

import pytest

from memcg_lab import collect, load, report, run, stats, tables
from test_analysis_collect import FIXTURES, PROACTIVE, copy_run, edit, reasons

MGLRU = PROACTIVE.replace("-default", "-mglru")


def row(table, arm):
    t = table[table["arm"] == arm]
    assert len(t) == 1
    return t.iloc[0]


def test_calls_of_the_real_run():
    d = collect.Dataset(FIXTURES)
    t = stats.proactive(d.proactive, ["default"])
    r = row(t, "default")
    assert (r["runs"], r["calls"], r["ok"], r["failed"]) == (1, 20, 20, 0)
    assert r["mean_ms"] == pytest.approx(5602.89823)
    # 20 calls: p50 between the 10th and 11th shortest
    assert r["p50_ms"] == pytest.approx((5900.103048 + 6097.073104) / 2)
    assert r["max_ms"] == pytest.approx(8210.751776)
    assert r["scanned_per_call"] == pytest.approx(48144373 / 20)
    assert r["reclaimed_per_call"] == pytest.approx(179409 / 20)
    assert r["efficiency_pct"] == pytest.approx(179409 / 48144373 * 100)


@pytest.fixture
def results(tmp_path):
    """The real run, and a copy as a second arm (mglru) in which made-up
    calls 3 and 7 came back short (EAGAIN) and the header is the one
    guest-run.sh writes today (end_s, not start_s)."""
    copy_run(tmp_path, PROACTIVE)
    p = copy_run(tmp_path, PROACTIVE, MGLRU)
    edit(p / "provenance.txt", "arm=default", "arm=mglru")
    edit(p / "params-resolved.env", "ARM=default", "ARM=mglru")
    edit(p / "proactive.csv", "call,start_s,", "call,end_s,")
    edit(p / "proactive.csv", "\n3,88.12,4653292592,ok,", "\n3,88.12,4653292592,short,")
    edit(p / "proactive.csv", "\n7,114.80,3913405072,ok,", "\n7,114.80,3913405072,short,")
    return tmp_path


def test_failed_calls_are_counted_per_arm(results):
    d = collect.Dataset(results)
    assert d.runs["valid"].all()
    t = stats.proactive(d.proactive, ["default", "mglru", "immediate"])
    assert list(t["arm"]) == ["default", "mglru"]
    assert (row(t, "mglru")["ok"], row(t, "mglru")["failed"]) == (18, 2)
    assert row(t, "default")["failed"] == 0


def test_runs_of_an_arm_are_pooled(results):
    copy_run(results, PROACTIVE, PROACTIVE + ".2")
    t = stats.proactive(collect.Dataset(results).proactive, ["default"])
    r = row(t, "default")
    assert (r["runs"], r["calls"], r["ok"]) == (2, 40, 40)
    assert r["max_ms"] == pytest.approx(8210.751776)
    assert r["efficiency_pct"] == pytest.approx(179409 / 48144373 * 100)


def test_text_and_markdown_layout(results):
    t = stats.proactive(collect.Dataset(results).proactive, ["default", "mglru"])
    text = tables.proactive_text(t, "proactive").splitlines()
    assert text[1].split() == ["arm", "runs", "calls", "ok", "failed", "mean", "(ms)", "p50",
                               "(ms)", "max", "(ms)", "scanned/call", "reclaimed/call",
                               "efficiency", "(%)"]
    assert text[2].split() == ["default", "1", "20", "20", "0", "5602.9", "5998.6", "8210.8",
                               "2407219", "8970", "0.37"]
    assert text[3].split()[:5] == ["mglru", "1", "20", "18", "2"]
    md = tables.proactive_markdown(t, "proactive")
    assert "| default | 1 | 20 | 20 | 0 | 5602.9 | 5998.6 | 8210.8 | 2407219 | 8970 | 0.37 |" in md


def test_report_has_the_table(results):
    out, _ = report.build(str(results), "default", stamp="x")
    sdir = os.path.join(out, "proactive")
    for name in ("proactive.txt", "proactive.md", "proactive.csv"):
        assert os.path.getsize(os.path.join(sdir, name)) > 0
    md = open(os.path.join(out, "report.md")).read()
    assert "memory.reclaim calls (proactive.csv)" in md
    assert "| mglru | 1 | 20 | 18 | 2 |" in md
    assert "memory.reclaim calls" in open(os.path.join(out, "cover-letter.txt")).read()


def test_broken_files_make_the_run_unreadable(results):
    path = results / PROACTIVE / "proactive.csv"
    text = path.read_text()
    path.write_text(text.replace(",pgsteal", ",steal"))
    assert reasons(results)[PROACTIVE] == (
        f"unreadable: {path}: missing columns ['pgsteal']")
    path.write_text(text.replace("6419024160", "soon"))
    with pytest.raises(run.RunError, match="must be numbers"):
        load.Run(results / PROACTIVE).proactive()
