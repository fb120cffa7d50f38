"""The 2011 cover letter's figures (analysis/memcg_lab/seed2011.csv, by
hand from the seed mail) and the grid that puts the lab's writeback-cp
arms beside them.  The lab's arms are labelled copies of the real
fixture run (test_analysis_writeback_cp.as_arm)."""
import math

import pytest

from memcg_lab import collect, report, stats, tables
from test_analysis_collect import WRITEBACK_CP, edit, report_texts
from test_analysis_writeback_cp import as_arm

KERNELS = ["3.1.0-vanilla", "rc5-vanilla", "freemore-v6r1", "isolate-v6r1", "andrea-v2r1"]
# The cover letter's rows (issue 20 item 3), in the lab's labels.
COVER_ROWS = ["System Time", "User Time", "Elapsed Time", "THP Active", "Fault Alloc",
              "Fault Fallback", "Direct pages scanned", "Kswapd pages scanned",
              "Kswapd pages reclaimed", "Direct pages reclaimed", "Kswapd efficiency",
              "Kswapd velocity", "Direct efficiency", "Direct velocity",
              "Percentage direct scans", "Page reclaim immediate", "Page rescued immediate",
              "Compaction stalls", "Compaction success", "Compaction failures"]


@pytest.fixture(scope="module")
def seed():
    return stats.load_seed()


def figure(seed, test, label, kernel, col="value"):
    f = seed[(seed["test"] == test) & (seed["label"] == label) & (seed["kernel"] == kernel)]
    assert len(f) == 1, (test, label, kernel)
    return f[col].iloc[0]


def test_every_cover_row_of_the_thp_vfat_test_for_every_kernel(seed):
    vfat = seed[seed["test"] == "writebackCPDevicevfat"]
    for label in COVER_ROWS:
        assert sorted(vfat[vfat["label"] == label]["kernel"]) == sorted(KERNELS), label
    assert not vfat["value"].isna().any()
    # the mail's spread is given for the alloc rows only
    assert vfat[vfat["section"] == "alloc"]["stddev"].notna().all()
    assert vfat[vfat["section"] == "vmstat"]["stddev"].isna().all()


def test_spot_checks_against_the_mail(seed):
    vfat = "writebackCPDevicevfat"
    assert figure(seed, vfat, "System Time", "isolate-v6r1") == 4.44
    assert figure(seed, vfat, "System Time", "isolate-v6r1", "stddev") == 6.48
    assert figure(seed, vfat, "Direct pages scanned", "freemore-v6r1") == 1764930052
    assert figure(seed, vfat, "Page rescued immediate", "isolate-v6r1") == 87848
    # andrea's column, wrapped onto the next line (and once split inside it)
    assert figure(seed, vfat, "Elapsed Time", "andrea-v2r1") == 472.43
    assert figure(seed, vfat, "System Time", "andrea-v2r1", "stddev") == 6.60
    assert figure(seed, vfat, "Direct velocity", "andrea-v2r1") == 2341481.435
    assert figure(seed, "writebackCPDeviceext4", "Elapsed Time", "isolate-v6r1") == 27.48
    assert figure(seed, "writebackCPDeviceBasevfat", "System Time", "rc5-vanilla") == 54.49


def test_the_transcribed_vmstat_block_agrees_with_itself(seed):
    """Figures the mail derives from others: a digit mistyped in either
    breaks one of these."""
    vfat = seed[seed["test"] == "writebackCPDevicevfat"]
    for kernel in KERNELS:
        v = vfat[vfat["kernel"] == kernel].set_index("label")["value"]
        elapsed = v["Total Elapsed Time"]
        assert v["Kswapd velocity"] == pytest.approx(v["Kswapd pages scanned"] / elapsed, abs=1e-3)
        assert v["Direct velocity"] == pytest.approx(v["Direct pages scanned"] / elapsed, abs=1e-3)
        # mmtests cuts the percentages down to whole numbers
        assert v["Kswapd efficiency"] == math.floor(
            v["Kswapd pages reclaimed"] / v["Kswapd pages scanned"] * 100)
        assert v["Direct efficiency"] == math.floor(
            v["Direct pages reclaimed"] / v["Direct pages scanned"] * 100)
        assert v["Percentage direct scans"] == math.floor(
            v["Direct pages scanned"] / (v["Direct pages scanned"] + v["Kswapd pages scanned"])
            * 100)
        assert v["Compaction stalls"] == v["Compaction success"] + v["Compaction failures"]
        assert v["Page writes by reclaim"] == v["Page writes file"] + v["Page writes anon"]


def test_each_thp_test_faults_the_same_mapping_on_every_kernel(seed):
    # ~1003 huge page faults per iteration, allocated or fallen back
    for test in ("writebackCPDevicevfat", "writebackCPDeviceext4"):
        for kernel in KERNELS:
            total = (figure(seed, test, "Fault Alloc", kernel)
                     + figure(seed, test, "Fault Fallback", kernel))
            assert total == pytest.approx(1003.1, abs=0.15), (test, kernel)


def test_what_the_mail_does_not_give_is_not_there(seed):
    sections = seed.groupby("test")["section"].unique().map(set).to_dict()
    assert sections == {"writebackCPDeviceBasevfat": {"alloc"},
                        "writebackCPDevicevfat": {"alloc", "duration", "vmstat"},
                        "writebackCPDeviceext4": {"alloc", "duration"}}


@pytest.mark.parametrize("scenario, params, test", [
    ("writeback-cp", {"THP": "always", "STICK_FS": "vfat"}, "writebackCPDevicevfat"),
    ("writeback-cp", {"THP": "never"}, "writebackCPDeviceBasevfat"),
    ("writeback-cp-ext4", {"THP": "always", "STICK_FS": "ext4"}, "writebackCPDeviceext4"),
    ("writeback-cp-ext4", {"THP": "never", "STICK_FS": "ext4"}, "writebackCPDeviceBaseext4"),
    ("writeback-cp", {"THP": "madvise"}, None),
    ("writeback-cp", {}, None),
    ("writeback-cp", {"THP": "always", "STICK_FS": "ext4"}, None),
    ("dirty-neighbour", {"THP": "always"}, None),
])
def test_the_2011_test_follows_scenario_thp_and_stick(scenario, params, test):
    assert stats.seed_test(scenario, params) == test


@pytest.mark.parametrize("seed_pct, lab_pct, expected", [
    (-90.0, -50.0, "same"), (20.0, 6.0, "same"), (-93.0, 100.0, "opposite"),
    (math.inf, -50.0, "opposite"), (16.6, 4.9, "flat"), (-3.0, -80.0, "flat"),
    (math.nan, -50.0, "n/a"), (-90.0, math.nan, "n/a")])
def test_direction(seed_pct, lab_pct, expected):
    assert stats.direction(seed_pct, lab_pct) == expected


def test_change_from_zero_keeps_its_sign():
    assert stats.change_pct(0, 87848) == math.inf
    assert stats.change_pct(0, 0) == 0
    assert stats.change_pct(46.40, 4.44) == pytest.approx(-90.43, abs=0.01)
    assert math.isnan(stats.change_pct(math.nan, 1))


def test_steps_pair_arms_of_one_kernel():
    assert stats.lab_steps(["default", "keep", "activate", "immediate"]) == [
        ("keep", "immediate"), ("activate", "immediate")]
    assert stats.lab_steps(["lab:keep", "lab:immediate", "other:activate"]) == [
        ("lab:keep", "lab:immediate")]
    assert stats.lab_steps(["default", "immediate"]) == []


def immediate_like(pairs):
    """The fixture's figures with the alloc's times halved and direct
    reclaim scanning twice as much."""
    out = []
    for name, v in pairs:
        if name in ("elapsed_s", "sys_s", "user_s"):
            v = repr(float(v) / 2)
        elif name == "pgscan_direct":
            v = str(int(v) * 2)
        out.append(v)
    return out


def unchanged(pairs):
    return [v for _, v in pairs]


@pytest.fixture
def results(tmp_path):
    as_arm(tmp_path, "keep", unchanged)
    as_arm(tmp_path, "immediate", immediate_like)
    return tmp_path


def beside_of(results, test="writebackCPDevicevfat"):
    d = collect.Dataset(results)
    arms = d.arms("writeback-cp")
    t = stats.writeback_cp(d.writeback_cp, arms, arms[0])
    return stats.beside_2011(t, stats.load_seed(), test)


def row(beside, label):
    r = beside[beside["label"] == label]
    assert len(r) == 1, label
    return r.iloc[0]


def test_grid_beside_2011_on_the_fixture(results):
    b = beside_of(results)
    assert list(dict.fromkeys(b["label"])) == COVER_ROWS
    sys_t = row(b, "System Time")
    assert (sys_t["seed_baseline_value"], sys_t["seed_value"]) == (46.40, 4.44)
    assert (sys_t["baseline"], sys_t["arm"], sys_t["lab_pct"]) == ("keep", "immediate", -50)
    assert sys_t["direction"] == "same"
    # 2011's LRU_IMMEDIATE scanned far less; this synthetic one scans more
    assert row(b, "Direct pages scanned")["direction"] == "opposite"
    # 2011 +16.6 %, the copies' fault counts are the same
    assert row(b, "Fault Alloc")["direction"] == "flat"
    # lab-alloc's THP lookup of the fixture wrote "not available"
    assert row(b, "THP Active")["direction"] == "n/a"
    assert row(b, "Page rescued immediate")["seed_pct"] == math.inf


def test_grid_of_a_test_the_mail_gives_less_of(results):
    b = beside_of(results, "writebackCPDeviceBasevfat")
    assert row(b, "System Time")["direction"] == "same"
    assert row(b, "Direct pages scanned")["direction"] == "n/a"
    assert math.isnan(row(b, "Direct pages scanned")["seed_value"])
    # the lab's side is still shown
    assert row(b, "Direct pages scanned")["lab_pct"] == 100


def test_text_and_markdown_grids(results):
    text = tables.beside_2011_text(beside_of(results))
    lines = text.splitlines()
    assert lines[1].startswith("beside 2011: writebackCPDevicevfat")
    sys_t = next(l for l in lines if l.startswith("System Time (s)")).split()
    assert sys_t[3:] == ["46.40", "4.44", "-90.4%", "5.62", "2.81", "-50.0%", "same", "?"]
    thp = next(l for l in lines if l.startswith("THP Active")).split()
    assert thp[-2:] == ["n/a", "n/a"]  # nothing to explain: no '?'
    md = tables.beside_2011_markdown(beside_of(results))
    assert ("|  | freemore-v6r1 | isolate-v6r1 | 2011 change | keep | immediate | "
            "immediate vs keep | direction | why |") in md
    assert "| Direct pages scanned (pages) | 1764930052 | 115140570 | -93.5% |" in md


def test_no_grid_without_a_step(tmp_path):
    as_arm(tmp_path, "immediate", immediate_like)
    b = beside_of(tmp_path)
    assert b.empty
    assert "no grid" in tables.beside_2011_text(b)
    assert tables.beside_2011_text(None) == ""


def test_report_puts_the_grid_by_the_runs_thp(results):
    out, _ = report.build(str(results), "keep", stamp="always")
    md, cover = report_texts(out, "writeback-cp", ["writeback-cp.txt", "writeback-cp-2011.csv"])
    assert "beside 2011: writebackCPDevicevfat" in cover
    assert "beside 2011: writebackCPDevicevfat" in md
    for arm in ("keep", "immediate"):
        edit(results / WRITEBACK_CP.replace("-default", f"-{arm}") / "params-resolved.env",
             "THP=always", "THP=never")
    out, _ = report.build(str(results), "keep", stamp="never")
    md, cover = report_texts(out, "writeback-cp", ["writeback-cp-2011.csv"])
    assert "beside 2011: writebackCPDeviceBasevfat" in cover


def test_report_has_no_grid_without_a_2011_counterpart(results):
    for arm in ("keep", "immediate"):
        edit(results / WRITEBACK_CP.replace("-default", f"-{arm}") / "params-resolved.env",
             "THP=always", "THP=madvise")
    out, _ = report.build(str(results), "keep", stamp="madvise")
    md, cover = report_texts(out, "writeback-cp", ["writeback-cp.txt"])
    assert "beside 2011" not in cover and "beside 2011" not in md
    assert not (results / "report" / "madvise" / "writeback-cp" / "writeback-cp-2011.csv").exists()
