"""lab-reclaim-attrib on the host against a fake tracefs (its trace_pipe a
regular file of real-format lines) and a fake cgroup tree: rows are summed
per (reclaimer, scanned, target, lru), cgroup ids resolve to paths, the
event is enabled then disabled, and a kernel without the tracepoint is an
error naming the path."""
import csv
import os
import subprocess

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
TOOL = os.path.join(TOOLS, "lab-reclaim-attrib")
EVENT = "events/vmscan/mm_vmscan_lru_shrink_inactive_memcg"


def line(cgid, task_cgid, target_cgid, kswapd, scanned, reclaimed, lru="file", wb=0):
    return (f"   neighbour-123 [001] ..... 42.000000: mm_vmscan_lru_shrink_inactive_memcg: "
            f"nid=0 memcg=5 cgid={cgid} task_memcg=7 task_cgid={task_cgid} "
            f"target_memcg=3 target_cgid={target_cgid} kswapd={kswapd} lru={lru} "
            f"nr_scanned={scanned} nr_reclaimed={reclaimed} nr_dirty=0 nr_writeback={wb} "
            f"nr_congested=0 nr_immediate=0 nr_activate=0\n")


def fake_tracefs(tmp_path, lines):
    t = tmp_path / "tracing"
    (t / EVENT).mkdir(parents=True)
    (t / EVENT / "enable").write_text("0\n")
    (t / "trace").write_text("")
    (t / "buffer_size_kb").write_text("1408\n")
    (t / "trace_pipe").write_text("".join(lines))
    return t


def test_rows_are_summed_and_cgroups_named(tmp_path):
    cg = tmp_path / "cg"
    for d in ("lab.slice/dirtier.scope", "lab.slice/neighbour.scope"):
        (cg / d).mkdir(parents=True)
    ino = {d: os.stat(cg / d).st_ino
           for d in ("lab.slice", "lab.slice/dirtier.scope", "lab.slice/neighbour.scope")}
    dirtier, neighbour, parent = (ino["lab.slice/dirtier.scope"],
                                  ino["lab.slice/neighbour.scope"], ino["lab.slice"])
    lines = [line(dirtier, neighbour, parent, 0, 32, 1, wb=31),
             line(dirtier, neighbour, parent, 0, 32, 2, wb=30),
             "  other-1 [000] ..... 1.0: mm_vmscan_kswapd_wake: nid=0 order=0\n",
             line(dirtier, 0, 0, 1, 64, 60),
             line(999999999, neighbour, parent, 0, 8, 8, lru="anon")]
    t = fake_tracefs(tmp_path, lines)
    out = tmp_path / "attribution.csv"
    p = subprocess.run([TOOL, "-t", str(t), "-r", str(cg), "-o", str(out)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    rows = {(r["reclaimer_cgroup"], r["scanned_cgroup"], r["target_cgroup"], r["lru"]): r
            for r in csv.DictReader(out.open())}
    r = rows[("lab.slice/neighbour.scope", "lab.slice/dirtier.scope", "lab.slice", "file")]
    assert (r["nr_scanned"], r["nr_reclaimed"], r["nr_writeback"], r["events"]) == ("64", "3", "61", "2")
    assert rows[("kswapd", "lab.slice/dirtier.scope", "global", "file")]["nr_scanned"] == "64"
    assert ("lab.slice/neighbour.scope", "cgid:999999999", "lab.slice", "anon") in rows
    assert len(rows) == 3
    assert (t / EVENT / "enable").read_text() == "0"
    assert (t / "buffer_size_kb").read_text() == "8192"


def test_a_kernel_without_the_tracepoint_is_an_error_naming_it(tmp_path):
    (tmp_path / "tracing").mkdir()
    p = subprocess.run([TOOL, "-t", str(tmp_path / "tracing"), "-o", str(tmp_path / "a.csv")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert f"{tmp_path}/tracing/{EVENT}/enable" in p.stderr
    assert not (tmp_path / "a.csv").exists()


def test_an_existing_output_is_never_overwritten(tmp_path):
    t = fake_tracefs(tmp_path, [])
    out = tmp_path / "attribution.csv"
    out.write_text("keep me\n")
    p = subprocess.run([TOOL, "-t", str(t), "-r", str(tmp_path), "-o", str(out)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert str(out) in p.stderr
    assert out.read_text() == "keep me\n"


def test_usage_errors_exit_2():
    p = subprocess.run([TOOL], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "usage: lab-reclaim-attrib" in p.stderr
