"""scenarios/lib/neighbour.sh, the neighbour's workload, run for real on
the host with fio and lab-mmap-probe (1 MiB bursts, a 16 MiB read file):
how it ends on the probe's duration, on the runner's SIGTERM at the
phase's end, and when the OOM killer takes the probe."""
import csv
import os
import signal
import subprocess
import time

import pytest

from memcg_lab import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scenarios", "lib", "neighbour.sh")
TOOLS = os.environ.get("LAB_TOOLS", os.path.join(ROOT, "build", "tools"))


@pytest.fixture
def neighbour(tmp_path):
    """Starts neighbour.sh OUT 1 50 DURATION_S with fio's runtime at 60 s;
    returns (start(duration_s) -> Popen, out dir)."""
    out = tmp_path / "out"
    out.mkdir()
    read_file = tmp_path / "read.dat"
    read_file.write_bytes(os.urandom(16 << 20))
    env = dict(os.environ, PATH=f"{TOOLS}:{os.environ['PATH']}", READ_FILE=str(read_file),
               READ_FILE_MB="16", NEIGHBOUR_S="60")

    def start(duration_s):
        return subprocess.Popen([SCRIPT, str(out), "1", "50", str(duration_s)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return start, out


def bursts(out):
    with open(out / "probe-latency.csv", newline="") as f:
        return [int(r["latency_us"]) for r in csv.DictReader(f)]


def wait_for_bursts(out, n):
    deadline = time.monotonic() + 20
    path = out / "probe-latency.csv"
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") > n:
            return
        time.sleep(0.05)
    pytest.fail(f"fewer than {n} bursts in 20 s")


def fio_reads(out):
    report = load.load_fio(str(out / "fio-neighbour.json"))
    return report["jobs"][0]["read"]["io_bytes"]


def test_the_reader_stops_when_the_probe_has_run_its_duration(neighbour):
    start, out = neighbour
    t0 = time.monotonic()
    p = start(2)
    _, err = p.communicate(timeout=50)
    assert p.returncode == 0, err
    # fio's own runtime is 60 s: the script stopped it, its report whole,
    # and marked the stop for the runner's count of its reads.
    assert time.monotonic() - t0 < 30
    assert fio_reads(out) > 0
    assert (out / "reader-stopped").exists()
    assert bursts(out)
    assert (out / "probe-histogram.csv").exists()


def test_sigterm_ends_the_phase_the_probe_after_its_burst(neighbour):
    """finish_neighbour_phase's SIGTERM: the reader stops at once, the
    probe after the burst in progress; both reports are whole."""
    start, out = neighbour
    p = start(60)
    wait_for_bursts(out, 20)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert fio_reads(out) > 0
    with open(out / "probe-histogram.csv", newline="") as f:
        counted = sum(int(r["count"]) for r in csv.DictReader(f))
    assert counted == len(bursts(out)) >= 20


def test_a_probe_the_oom_killer_takes_fails_the_workload_and_keeps_its_bursts(neighbour):
    start, out = neighbour
    p = start(60)
    wait_for_bursts(out, 20)
    probe = subprocess.run(["pgrep", "-P", str(p.pid), "-x", "lab-mmap-probe"],
                           capture_output=True, text=True)
    os.kill(int(probe.stdout.split()[0]), signal.SIGKILL)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGKILL, err
    # The rows of the bursts it finished; no histogram it never wrote.
    assert len(bursts(out)) >= 20
    assert not (out / "probe-histogram.csv").exists()
    assert fio_reads(out) > 0
