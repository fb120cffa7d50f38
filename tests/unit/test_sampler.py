"""lab-sampler and lab-mmap-probe, run for real on the host against a
cgroup tree laid out in a temporary folder (the -r option)."""
import csv
import os
import re
import signal
import subprocess
import time

import pytest

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
SAMPLER = os.path.join(TOOLS, "lab-sampler")
PROBE = os.path.join(TOOLS, "lab-mmap-probe")

MEMORY_STAT = "anon 4096\nfile 8192\ninactive_file 4096\nfile_writeback 2048\n"
PRESSURE = ("some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=678\n")
IO_STAT = "253:16 rbytes=1 wbytes=4096 rios=1 wios=2 dbytes=0 dios=0\n"


def make_cgroup(root, name):
    d = root / name
    d.mkdir(parents=True)
    (d / "memory.stat").write_text(MEMORY_STAT)
    (d / "memory.pressure").write_text(PRESSURE)
    (d / "io.stat").write_text(IO_STAT)
    (d / "memory.current").write_text("123456\n")
    (d / "cpu.stat").write_text("usage_usec 10\nuser_usec 7\nsystem_usec 3\n")
    return d


def run_sampler(args, seconds=0.35):
    p = subprocess.Popen([SAMPLER] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=5)
    return p.returncode, out, err


def rows(text):
    return list(csv.reader(text.splitlines()))


def test_sampler_writes_long_format_for_each_file(tmp_path):
    make_cgroup(tmp_path, "lab.slice/dirtier.scope")
    rc, out, err = run_sampler(["-i", "100", "-r", str(tmp_path), "lab.slice/dirtier.scope"])
    assert rc == 0, err
    table = rows(out)
    assert table[0] == ["time_s", "cgroup", "key", "value"]
    got = {(r[1], r[2]): r[3] for r in table[1:]}
    cg = "lab.slice/dirtier.scope"
    assert got[(cg, "memory.stat.file_writeback")] == "2048"
    assert got[(cg, "memory.pressure.some.total")] == "12345"
    assert got[(cg, "memory.pressure.some.avg10")] == "1.50"
    assert got[(cg, "io.stat.253:16.wbytes")] == "4096"
    assert got[(cg, "memory.current")] == "123456"
    assert got[(cg, "cpu.stat.system_usec")] == "3"
    assert any(r[1] == "-" and r[2] == "vmstat.nr_free_pages" for r in table[1:])


def test_sampler_never_samples_faster_than_asked(tmp_path):
    # Only the lower bound is asserted: a loaded machine may delay ticks.
    make_cgroup(tmp_path, "a")
    rc, out, _ = run_sampler(["-i", "50", "-r", str(tmp_path), "a"], seconds=0.6)
    assert rc == 0
    times = sorted({float(r[0]) for r in rows(out)[1:]})
    assert len(times) >= 2
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.045


def test_sampler_reports_its_own_cpu_time_at_exit(tmp_path):
    make_cgroup(tmp_path, "a")
    rc, out, err = run_sampler(["-i", "50", "-r", str(tmp_path), "a"], seconds=0.6)
    assert rc == 0, err
    m = re.search(r"lab-sampler: (\d+) ticks in ([\d.]+) s, cpu ([\d.]+) s "
                  r"\(user ([\d.]+), system ([\d.]+)\), ([\d.]+)% of one CPU", err)
    assert m, err
    ticks, wall, cpu, user, system, pct = (float(g) for g in m.groups())
    assert ticks == len({r[0] for r in rows(out)[1:]})
    assert 0.4 < wall < 5
    # printed to 3 and 2 decimals: allow for the rounding
    assert cpu == pytest.approx(user + system, abs=0.0011)
    assert pct == pytest.approx(100 * cpu / wall, abs=100 * 0.0006 / wall + 0.006)


def test_sampler_reports_an_absent_cgroup_once_and_keeps_going(tmp_path):
    rc, out, err = run_sampler(["-i", "50", "-r", str(tmp_path), "not/yet"], seconds=0.4)
    assert rc == 0
    assert err.count(str(tmp_path / "not/yet")) == 1
    assert "No such file or directory" in err
    assert any(r[1] == "-" for r in rows(out)[1:])


def test_sampler_picks_up_a_cgroup_created_later(tmp_path):
    p = subprocess.Popen([SAMPLER, "-i", "50", "-r", str(tmp_path), "late"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    make_cgroup(tmp_path, "late")
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=5)
    assert any(r[1] == "late" for r in rows(out)[1:])


def test_sampler_refuses_to_overwrite_an_output_file(tmp_path):
    out = tmp_path / "samples.csv"
    out.write_text("precious\n")
    p = subprocess.run([SAMPLER, "-o", str(out)], capture_output=True, text=True, timeout=5)
    assert p.returncode == 1
    assert str(out) in p.stderr and "File exists" in p.stderr
    assert out.read_text() == "precious\n"


def test_sampler_names_the_path_it_cannot_create(tmp_path):
    bad = tmp_path / "no/such/dir/samples.csv"
    p = subprocess.run([SAMPLER, "-o", str(bad)], capture_output=True, text=True, timeout=5)
    assert p.returncode == 1 and str(bad) in p.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_sampler_fails_on_a_full_disk():
    p = subprocess.Popen([SAMPLER, "-i", "20"], stdout=open("/dev/full", "w"),
                         stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 1
    assert "No space left on device" in err


@pytest.mark.parametrize("args", [["-i", "abc"], ["-i", "5"], ["-x"]])
def test_sampler_rejects_bad_arguments(args):
    p = subprocess.run([SAMPLER] + args, capture_output=True, text=True, timeout=5)
    assert p.returncode == 2


def test_probe_records_one_latency_per_iteration(tmp_path):
    out = tmp_path / "lat.csv"
    p = subprocess.run([PROBE, "-s", "4", "-i", "50", "-d", "1", "-o", str(out)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    table = list(csv.DictReader(out.open()))
    assert 5 <= len(table) <= 25
    assert all(float(r["latency_us"]) > 0 for r in table)


def test_probe_requires_an_output_and_sane_sizes(tmp_path):
    assert subprocess.run([PROBE], capture_output=True, timeout=5).returncode == 2
    p = subprocess.run([PROBE, "-s", "0", "-o", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=5)
    assert p.returncode == 2 and "bad size" in p.stderr
