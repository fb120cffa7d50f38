"""lab-sampler and lab-mmap-probe, run for real on the host against a
cgroup tree laid out in a temporary folder (the -r option)."""
import csv
import os
import signal
import subprocess
import time

import pytest

from memcg_lab import run

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
    # A late tick is followed by the next one on the grid, or by the one
    # after it when that is due in less than half an interval.
    make_cgroup(tmp_path, "a")
    rc, out, _ = run_sampler(["-i", "50", "-r", str(tmp_path), "a"], seconds=0.6)
    assert rc == 0
    times = sorted({float(r[0]) for r in rows(out)[1:]})
    assert len(times) >= 2
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.025


def test_sampler_skips_the_ticks_it_missed_instead_of_catching_up(tmp_path):
    # A stopped sampler (here SIGSTOP, in a guest a stall) owes ~10 ticks
    # when it resumes: it must not take them back to back.
    make_cgroup(tmp_path, "a")
    p = subprocess.Popen([SAMPLER, "-i", "50", "-r", str(tmp_path), "a"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    p.send_signal(signal.SIGCONT)
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    times = sorted({float(r[0]) for r in rows(out)[1:]})
    assert min(b - a for a, b in zip(times, times[1:])) >= 0.025
    cost = run.parse_sampler_cost(err)
    assert cost, err
    assert cost["ticks_missed"] >= 5


def test_sampler_reports_its_own_cpu_time_at_exit(tmp_path):
    make_cgroup(tmp_path, "a")
    rc, out, err = run_sampler(["-i", "50", "-r", str(tmp_path), "a"], seconds=0.6)
    assert rc == 0, err
    # One line of key=value words, each key once, read by the analysis.
    line = [x for x in err.splitlines() if x.startswith(run.SAMPLER_COST_PREFIX)]
    assert len(line) == 1, err
    keys = [w.split("=", 1)[0] for w in line[0][len(run.SAMPLER_COST_PREFIX):].split()]
    assert keys == list(run.SAMPLER_COST_KEYS)
    cost = run.parse_sampler_cost(err)
    assert cost["ticks"] == len({r[0] for r in rows(out)[1:]})
    assert 0.4 < cost["wall_s"] < 5
    # printed to 3 decimals: allow for the rounding
    assert cost["cpu_s"] == pytest.approx(cost["user_s"] + cost["system_s"], abs=0.0011)
    assert (cost["slow_cgroups"], cost["cgroups"], cost["vmstat"]) == (0, 1, "fast")


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


SLOW = ("memory.events.", "memory.pressure.", "cpu.stat.", "io.stat.")


def ticks_in_order(text):
    """[(time_s, {(cgroup, key)})] of each tick, in file order.  A tick
    starts with its /proc/vmstat rows (cgroup "-"); ticks are not told
    apart by time: after a delay the sampler catches up with its
    schedule, and such ticks may share a millisecond."""
    ticks, prev = [], None
    for t, cg, key, _ in rows(text)[1:]:
        if cg == "-" and prev != "-":
            ticks.append((float(t), set()))
        ticks[-1][1].add((cg, key))
        prev = cg
    return ticks


def slow_keys(keys):
    return {k for k in keys if k[1].startswith(SLOW)}


def fast_keys(keys):
    return {k for k in keys if not k[1].startswith(SLOW)}


def run_sampler_for_ticks(tmp_path, args, n):
    """Runs the sampler into a file until it has written n ticks (a loaded
    machine may start it late), then stops it; (rc, csv text, stderr)."""
    out = tmp_path / "samples.csv"
    p = subprocess.Popen([SAMPLER, "-o", str(out)] + args, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not out.exists() or out.read_text().count(",-,vmstat.nr_free_pages,") < n:
        if time.monotonic() > deadline or p.poll() is not None:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    return p.returncode, out.read_text(), err


def sampled_tree(tmp_path):
    make_cgroup(tmp_path, "a")
    (tmp_path / "a" / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 0\noom_kill 0\n")
    return ["-r", str(tmp_path), "a"]


def test_without_s_every_tick_reads_every_file(tmp_path):
    rc, out, err = run_sampler_for_ticks(tmp_path, ["-i", "50"] + sampled_tree(tmp_path), 3)
    assert rc == 0, err
    ticks = ticks_in_order(out)
    assert len(ticks) >= 3
    assert all(keys == ticks[0][1] for _, keys in ticks)
    assert ("a", "cpu.stat.usage_usec") in ticks[0][1]
    assert ("a", "memory.events.max") in ticks[0][1]


def test_slow_files_are_read_every_nth_tick_and_fast_files_every_tick(tmp_path):
    rc, out, err = run_sampler_for_ticks(
        tmp_path, ["-i", "50", "-s", "200"] + sampled_tree(tmp_path), 9)
    assert rc == 0, err
    ticks = ticks_in_order(out)
    assert len(ticks) >= 9
    full = ticks[0][1]
    slow, fast = slow_keys(full), fast_keys(full)
    assert {("a", "memory.events.max"), ("a", "memory.pressure.some.total"),
            ("a", "cpu.stat.usage_usec"), ("a", "io.stat.253:16.wbytes")} <= slow
    assert {("a", "memory.stat.anon"), ("a", "memory.current"),
            ("-", "vmstat.nr_free_pages")} <= fast
    for n, (t, keys) in enumerate(ticks):
        assert fast_keys(keys) == fast, f"tick {n} at {t}"
        assert slow_keys(keys) in (slow, set()), f"tick {n} at {t}"
    # Tick n is due at n * 50 ms and reads the slow files when n % 4 == 0;
    # a loaded host may make the sampler skip a due tick, so the check is
    # on what that implies: slow reads are due 200 ms apart (taken more
    # than 100 ms apart, however late a tick ran), with at most 3 ticks
    # without them in a row, and the last (the stop's) reads them.
    assert slow_keys(ticks[-1][1]) == slow
    with_slow = [n for n, (_, keys) in enumerate(ticks[:-1]) if slow_keys(keys)]
    assert with_slow[0] == 0 and len(with_slow) >= 2
    for a, b in zip(with_slow, with_slow[1:]):
        assert ticks[b][0] - ticks[a][0] > 0.1, (a, b)
        assert b - a <= 4, (a, b)
    assert len(ticks) - 1 - with_slow[-1] <= 4


def test_the_first_and_the_stop_tick_read_the_slow_files(tmp_path):
    # -s far beyond the run: only the first tick and the one taken at
    # SIGTERM (an extra tick, since the last regular one was partial).
    rc, out, err = run_sampler_for_ticks(
        tmp_path, ["-i", "50", "-s", "3600000"] + sampled_tree(tmp_path), 4)
    assert rc == 0, err
    ticks = ticks_in_order(out)
    assert len(ticks) >= 4
    with_slow = [n for n, (_, keys) in enumerate(ticks) if slow_keys(keys)]
    assert with_slow == [0, len(ticks) - 1]
    assert all(fast_keys(keys) == fast_keys(ticks[0][1]) for _, keys in ticks)
    # The stop's tick is counted in the exit line, at a time of its own.
    assert run.parse_sampler_cost(err)["ticks"] == len(ticks)
    assert ticks[-1][0] > ticks[-2][0]


def start_after_first_tick(tmp_path, args):
    """Starts the sampler with every file read only on its first and stop
    ticks (-s far beyond the test) into tmp_path/samples.csv; returns
    (process, csv path) once the first tick is in the file."""
    csv_path = tmp_path / "samples.csv"
    args = ["-i", "50", "-s", "3600000", "-o", str(csv_path)] + args
    p = subprocess.Popen([SAMPLER] + args, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 5
    while not (csv_path.exists() and "cpu.stat.usage_usec" in csv_path.read_text()):
        assert time.monotonic() < deadline, "no first tick"
        time.sleep(0.01)
    return p, csv_path


def test_a_slow_counter_spans_the_whole_run(tmp_path):
    # The slow file changes while the sampler runs: the stop's tick reads
    # the value at the end, as the fast files' last rows do.
    p, csv_path = start_after_first_tick(tmp_path, sampled_tree(tmp_path))
    (tmp_path / "a" / "cpu.stat").write_text("usage_usec 99\nuser_usec 70\nsystem_usec 29\n")
    (tmp_path / "a" / "memory.current").write_text("654321\n")
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    out = csv_path.read_text()
    usage = [r[3] for r in rows(out)[1:] if r[1:3] == ["a", "cpu.stat.usage_usec"]]
    assert usage == ["10", "99"]
    current = [r[3] for r in rows(out)[1:] if r[1:3] == ["a", "memory.current"]]
    assert current[0] == "123456" and current[-1] == "654321"


def test_a_slow_cgroup_is_read_only_on_slow_ticks(tmp_path):
    # -S p: all of p's files (memory.stat too) on the slow ticks, given
    # before or after -r; the leaf's fast files still every tick.
    make_cgroup(tmp_path, "p")
    make_cgroup(tmp_path, "p/leaf")
    rc, out, err = run_sampler_for_ticks(
        tmp_path, ["-S", "/p", "-i", "50", "-s", "200", "-r", str(tmp_path), "p/leaf"], 9)
    assert rc == 0, err
    ticks = ticks_in_order(out)
    assert len(ticks) >= 9
    with_parent = [n for n, (_, keys) in enumerate(ticks) if any(cg == "p" for cg, _ in keys)]
    with_slow = [n for n, (_, keys) in enumerate(ticks) if slow_keys(keys)]
    assert with_parent == with_slow
    assert with_parent[0] == 0 and with_parent[-1] == len(ticks) - 1
    assert len(with_parent) < len(ticks)
    parent_keys = {k for cg, k in ticks[0][1] if cg == "p"}
    assert {"memory.stat.anon", "memory.current", "cpu.stat.usage_usec"} <= parent_keys
    for _, keys in ticks:
        assert ("p/leaf", "memory.stat.anon") in keys


def test_v_reads_vmstat_only_on_slow_ticks(tmp_path):
    out = tmp_path / "samples.csv"
    args = ["-V", "-i", "50", "-s", "200", "-o", str(out)] + sampled_tree(tmp_path)
    p = subprocess.Popen([SAMPLER] + args, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    table = rows(out.read_text())[1:]
    leaf = sorted({float(r[0]) for r in table if r[1:3] == ["a", "memory.stat.anon"]})
    vmstat = sorted({float(r[0]) for r in table if r[2] == "vmstat.nr_free_pages"})
    slow = sorted({float(r[0]) for r in table if r[2] == "cpu.stat.usage_usec"})
    assert len(leaf) >= 8
    assert vmstat == slow and set(vmstat) < set(leaf)
    assert vmstat[0] == leaf[0] and vmstat[-1] == leaf[-1]
    assert run.parse_sampler_cost(err)["vmstat"] == "slow"


def test_rows_are_written_on_the_slow_ticks_and_at_stop(tmp_path):
    # Between slow ticks rows wait in the buffer (one write per slow tick
    # to the run's 9p folder); stopping writes every one of them.
    p, out = start_after_first_tick(tmp_path, sampled_tree(tmp_path))
    time.sleep(0.4)
    assert len(ticks_in_order(out.read_text())) == 1
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    ticks = ticks_in_order(out.read_text())
    assert len(ticks) >= 5 and run.parse_sampler_cost(err)["ticks"] == len(ticks)


def test_sampler_keeps_the_lines_it_can_parse(tmp_path):
    # Blank lines, a line of no known shape and a last line without a
    # newline: the good rows are all written, nothing else.
    d = make_cgroup(tmp_path, "a")
    (d / "memory.stat").write_text("anon 1\n\n\nnot a number here\nfile x\n"
                                   "  inactive_file\t7 \nshmem 3")
    (d / "memory.pressure").write_text("some avg10=0.50 total=9\nfull avg10 total=1\n")
    rc, out, err = run_sampler(["-i", "100", "-r", str(tmp_path), "a"])
    assert rc == 0, err
    got = {r[2]: r[3] for r in rows(out)[1:] if r[1] == "a"}
    stat = {k: v for k, v in got.items() if k.startswith("memory.stat.")}
    assert stat == {"memory.stat.anon": "1", "memory.stat.inactive_file": "7",
                    "memory.stat.shmem": "3"}
    pressure = {k: v for k, v in got.items() if k.startswith("memory.pressure.")}
    assert pressure == {"memory.pressure.some.avg10": "0.50", "memory.pressure.some.total": "9"}


def test_sampler_rejects_too_many_cgroups(tmp_path):
    p = subprocess.run([SAMPLER, "-r", str(tmp_path)] + ["-S", "x"] * 30 + ["y"] * 35,
                       capture_output=True, text=True, timeout=5)
    assert p.returncode == 2 and "at most 64 cgroups" in p.stderr


@pytest.mark.parametrize("args, why", [
    (["-s", "0"], "(10..3600000)"),
    (["-s", "abc"], "(10..3600000)"),
    (["-s", ""], "(10..3600000)"),
    (["-s", "3600001"], "(10..3600000)"),
    (["-s", "150"], "not a multiple of the interval -i 1000 ms"),
    (["-i", "100", "-s", "250"], "not a multiple of the interval -i 100 ms"),
    # -s after or before -i, and never below it
    (["-s", "50", "-i", "100"], "not a multiple of the interval -i 100 ms"),
])
def test_sampler_rejects_a_bad_slow_interval(args, why):
    p = subprocess.run([SAMPLER] + args, capture_output=True, text=True, timeout=5)
    assert p.returncode == 2
    assert p.stdout == ""
    assert "bad slow interval -s" in p.stderr and why in p.stderr


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
