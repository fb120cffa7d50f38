"""lab-reclaim-attrib on the host against a fake tracefs (its trace_pipe a
regular file of real-format lines, its format files copied from a 6.1
kernel and the patch series) and fake cgroup and /proc trees: the mode
follows the events present, rows are summed per (reclaimer, scanned,
target, lru), cgroup ids and pids resolve to cgroup paths, reclaim passes
are timed, events are enabled then disabled, and missing events are
errors naming the path."""
import csv
import os
import signal
import subprocess
import time

import pytest

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
TOOL = os.path.join(TOOLS, "lab-reclaim-attrib")
PATCHED = "mm_vmscan_lru_shrink_inactive_memcg"
VANILLA = "mm_vmscan_lru_shrink_inactive"
PASSES = ["mm_vmscan_direct_reclaim_begin", "mm_vmscan_direct_reclaim_end",
          "mm_vmscan_memcg_reclaim_begin", "mm_vmscan_memcg_reclaim_end"]

# The print fmt lines of the kernels' format files (fields elided).
PRINT_FMT = {
    PATCHED: 'print fmt: "nid=%d memcg=%u cgid=%llu task_memcg=%u task_cgid=%llu '
             'target_memcg=%u target_cgid=%llu kswapd=%d lru=%s nr_scanned=%lu '
             'nr_reclaimed=%lu nr_dirty=%u nr_writeback=%u nr_congested=%u '
             'nr_immediate=%u nr_activate=%u", REC->nid, REC->memcg_id',
    VANILLA: 'print fmt: "nid=%d nr_scanned=%ld nr_reclaimed=%ld nr_dirty=%ld '
             'nr_writeback=%ld nr_congested=%ld nr_immediate=%ld nr_activate_anon=%d '
             'nr_activate_file=%d nr_ref_keep=%ld nr_unmap_fail=%ld priority=%d '
             'flags=%s", REC->nid, REC->nr_scanned',
    "begin": 'print fmt: "order=%d gfp_flags=%s", REC->order, (REC->gfp_flags)',
    "end": 'print fmt: "nr_reclaimed=%lu", REC->nr_reclaimed',
}


def patched_line(cgid, task_cgid, target_cgid, kswapd, scanned, reclaimed, lru="file", wb=0):
    return (f"   neighbour-123 [001] ..... 42.000000: {PATCHED}: "
            f"nid=0 memcg=5 cgid={cgid} task_memcg=7 task_cgid={task_cgid} "
            f"target_memcg=3 target_cgid={target_cgid} kswapd={kswapd} lru={lru} "
            f"nr_scanned={scanned} nr_reclaimed={reclaimed} nr_dirty=0 nr_writeback={wb} "
            f"nr_congested=0 nr_immediate=0 nr_activate=0\n")


def vanilla_line(task, ts, scanned, reclaimed, flags="RECLAIM_WB_FILE|RECLAIM_WB_ASYNC", wb=0):
    return (f"  {task} [000] d..1. {ts}: {VANILLA}: nid=0 nr_scanned={scanned} "
            f"nr_reclaimed={reclaimed} nr_dirty=0 nr_writeback={wb} nr_congested=0 "
            f"nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=0 "
            f"nr_unmap_fail=0 priority=12 flags={flags}\n")


def pass_line(task, ts, event, reclaimed=0):
    fields = "order=0 gfp_flags=GFP_HIGHUSER_MOVABLE" if event.endswith("begin") \
        else f"nr_reclaimed={reclaimed}"
    return f"  {task} [000] ..... {ts}: {event}: {fields}\n"


def fake_tracefs(tmp_path, lines, events):
    t = tmp_path / "tracing"
    for ev in events:
        d = t / "events" / "vmscan" / ev
        d.mkdir(parents=True)
        (d / "enable").write_text("0\n")
        key = ev if ev in PRINT_FMT else ev.rsplit("_", 1)[1]
        (d / "format").write_text(f"name: {ev}\nID: 1\nformat:\n\tfield:int nid;\n\n"
                                  f"{PRINT_FMT[key]}\n")
    (t / "trace").write_text("old\n")
    (t / "buffer_size_kb").write_text("1408\n")
    (t / "trace_pipe").write_text("".join(lines))
    return t


def run(args):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=30)


def read_rows(out):
    return {(r["reclaimer_cgroup"], r["scanned_cgroup"], r["target_cgroup"], r["lru"]): r
            for r in csv.DictReader(out.open())}


def test_patched_rows_are_summed_and_cgroup_ids_named(tmp_path):
    cg = tmp_path / "cg"
    for d in ("lab.slice/dirtier.scope", "lab.slice/neighbour.scope"):
        (cg / d).mkdir(parents=True)
    ino = {d: os.stat(cg / d).st_ino
           for d in ("lab.slice", "lab.slice/dirtier.scope", "lab.slice/neighbour.scope")}
    dirtier, neighbour, parent = (ino["lab.slice/dirtier.scope"],
                                  ino["lab.slice/neighbour.scope"], ino["lab.slice"])
    lines = [patched_line(dirtier, neighbour, parent, 0, 32, 1, wb=31),
             patched_line(dirtier, neighbour, parent, 0, 32, 2, wb=30),
             "  other-1 [000] ..... 1.0: mm_vmscan_kswapd_wake: nid=0 order=0\n",
             patched_line(dirtier, 0, 0, 1, 64, 60),
             patched_line(999999999, neighbour, parent, 0, 8, 8, lru="anon")]
    t = fake_tracefs(tmp_path, lines, [PATCHED])
    out = tmp_path / "attribution.csv"
    p = run(["-t", str(t), "-r", str(cg), "-o", str(out)])
    assert p.returncode == 0, p.stderr
    rows = read_rows(out)
    r = rows[("lab.slice/neighbour.scope", "lab.slice/dirtier.scope", "lab.slice", "file")]
    assert (r["nr_scanned"], r["nr_reclaimed"], r["nr_writeback"], r["events"]) == ("64", "3", "61", "2")
    assert rows[("kswapd", "lab.slice/dirtier.scope", "global", "file")]["nr_scanned"] == "64"
    assert ("lab.slice/neighbour.scope", "cgid:999999999", "lab.slice", "anon") in rows
    assert len(rows) == 3
    header = out.read_text().splitlines()[0].split(",")
    assert header[:6] == ["reclaimer_cgroup", "scanned_cgroup", "nr_scanned",
                          "nr_reclaimed", "reclaim_ns", "events"]
    assert "mode=patched\n" in (tmp_path / "attribution.csv.meta").read_text()
    assert "pass_events=no\n" in (tmp_path / "attribution.csv.meta").read_text()
    assert (t / "events/vmscan" / PATCHED / "enable").read_text() == "0"
    assert (t / "buffer_size_kb").read_text() == "8192"
    assert (t / "trace").read_text() == ""


def test_vanilla_attributes_to_the_pid_cgroup_and_times_passes(tmp_path):
    proc = tmp_path / "proc"
    (proc / "1234").mkdir(parents=True)
    (proc / "1234" / "cgroup").write_text("0::/lab.slice/dirtier.scope\n")
    (proc / "77").mkdir()
    (proc / "77" / "cgroup").write_text("0::/\n")
    dd, kw, gone = "dd-1234", "kworker/u8:2 my-dash-77", "gone-4242"
    lines = [pass_line(dd, "42.000100", PASSES[2]),
             vanilla_line(dd, "42.000200", 32, 30, wb=2),
             vanilla_line(dd, "42.000300", 32, 20, flags="RECLAIM_WB_ANON|RECLAIM_WB_ASYNC"),
             pass_line(dd, "42.001100", PASSES[3], 50),
             pass_line(dd, "43.000000", PASSES[2]),
             vanilla_line(dd, "43.000100", 10, 10),
             pass_line(dd, "43.000600", PASSES[3], 10),
             pass_line(kw, "44.000000", PASSES[0]),
             vanilla_line(kw, "44.000010", 16, 16),
             pass_line(kw, "44.000020", PASSES[1], 16),
             vanilla_line("kswapd0-45", "45.0", 64, 64),
             vanilla_line(gone, "46.0", 8, 0),
             pass_line(gone, "46.5", PASSES[3])]          # its begin came before us
    t = fake_tracefs(tmp_path, lines, [VANILLA] + PASSES)
    out = tmp_path / "attribution.csv"
    p = run(["-t", str(t), "-p", str(proc), "-r", str(tmp_path), "-o", str(out)])
    assert p.returncode == 0, p.stderr
    rows = read_rows(out)
    d = "lab.slice/dirtier.scope"
    f = rows[(d, "unknown", "memcg", "file")]
    assert (f["nr_scanned"], f["nr_reclaimed"], f["nr_writeback"], f["events"]) == ("42", "40", "2", "2")
    assert rows[(d, "unknown", "memcg", "anon")]["nr_reclaimed"] == "20"
    timed = rows[(d, "-", "memcg", "-")]
    assert (timed["reclaim_ns"], timed["events"], timed["nr_scanned"]) == ("1600000", "2", "0")
    assert rows[("/", "unknown", "global", "file")]["nr_scanned"] == "16"
    assert rows[("/", "-", "global", "-")]["reclaim_ns"] == "20000"
    assert rows[("kswapd", "unknown", "global", "file")]["nr_reclaimed"] == "64"
    assert rows[("unknown", "unknown", "unknown", "file")]["nr_scanned"] == "8"
    assert len(rows) == 7
    assert (tmp_path / "attribution.csv.meta").read_text().startswith("mode=vanilla\n")
    for ev in [VANILLA] + PASSES:
        assert (t / "events/vmscan" / ev / "enable").read_text() == "0"


def test_a_kernel_without_any_shrink_event_is_an_error_naming_it(tmp_path):
    (tmp_path / "tracing").mkdir()
    p = run(["-t", str(tmp_path / "tracing"), "-o", str(tmp_path / "a.csv")])
    assert p.returncode == 1
    assert f"{tmp_path}/tracing/events/vmscan/{VANILLA}/format" in p.stderr
    assert not (tmp_path / "a.csv").exists()


def test_vanilla_without_a_pass_event_is_an_error_naming_it(tmp_path):
    t = fake_tracefs(tmp_path, [], [VANILLA] + PASSES[:3])
    p = run(["-t", str(t), "-o", str(tmp_path / "a.csv")])
    assert p.returncode == 1
    assert f"{t}/events/vmscan/{PASSES[3]}/format" in p.stderr
    assert (t / "events/vmscan" / VANILLA / "enable").read_text() == "0\n"


def test_a_patched_format_without_a_field_is_an_error_naming_it(tmp_path):
    t = fake_tracefs(tmp_path, [], [PATCHED])
    fmt = t / "events/vmscan" / PATCHED / "format"
    fmt.write_text(fmt.read_text().replace(" target_cgid=%llu", ""))
    p = run(["-t", str(t), "-o", str(tmp_path / "a.csv")])
    assert p.returncode == 1
    assert f"{fmt}: no 'target_cgid=' in print fmt" in p.stderr


def test_an_unwritable_enable_file_is_an_error_naming_it(tmp_path):
    t = fake_tracefs(tmp_path, [], [PATCHED])
    enable = t / "events/vmscan" / PATCHED / "enable"
    enable.unlink()
    enable.mkdir()
    p = run(["-t", str(t), "-o", str(tmp_path / "a.csv")])
    assert p.returncode == 1
    assert str(enable) in p.stderr


def test_an_existing_output_is_never_overwritten(tmp_path):
    t = fake_tracefs(tmp_path, [], [PATCHED])
    out = tmp_path / "attribution.csv"
    out.write_text("keep me\n")
    p = run(["-t", str(t), "-r", str(tmp_path), "-o", str(out)])
    assert p.returncode == 1
    assert str(out) in p.stderr
    assert out.read_text() == "keep me\n"
    assert (t / "trace").read_text() == "old\n"


def test_usage_errors_exit_2(tmp_path):
    p = run([])
    assert p.returncode == 2
    assert "usage: lab-reclaim-attrib" in p.stderr
    p = run(["-o", str(tmp_path / "a.csv"), "-d", "0"])
    assert p.returncode == 2
    assert "bad duration '0'" in p.stderr


def fifo_tracefs(tmp_path, lines):
    """A tracefs whose trace_pipe is a FIFO kept open, like the real one:
    it never ends, so only -d or a signal stops the tool."""
    t = fake_tracefs(tmp_path, [], [PATCHED])
    (t / "trace_pipe").unlink()
    os.mkfifo(t / "trace_pipe")
    fd = os.open(t / "trace_pipe", os.O_RDWR | os.O_NONBLOCK)
    os.write(fd, "".join(lines).encode())
    return t, fd


@pytest.mark.parametrize("how", ["duration", "sigterm"])
def test_a_live_pipe_stops_on_duration_or_signal(tmp_path, how):
    cg = tmp_path / "cg"
    cg.mkdir()
    t, fd = fifo_tracefs(tmp_path, [patched_line(os.stat(cg).st_ino, 0, 0, 1, 5, 4)])
    out = tmp_path / "attribution.csv"
    args = [TOOL, "-t", str(t), "-r", str(cg), "-o", str(out)]
    try:
        if how == "duration":
            p = subprocess.run(args + ["-d", "1"], capture_output=True, text=True, timeout=10)
            rc, err = p.returncode, p.stderr
        else:
            proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
            rc = proc.returncode
    finally:
        os.close(fd)
    assert rc == 0, err
    assert read_rows(out)[("kswapd", "/", "global", "file")]["nr_reclaimed"] == "4"
    assert (t / "events/vmscan" / PATCHED / "enable").read_text() == "0"
