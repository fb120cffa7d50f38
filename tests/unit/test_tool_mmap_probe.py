"""lab-mmap-probe's latency histogram (-H), run for real on the host with
1 MiB bursts: its counts are the per-burst rows', its buckets contiguous
log2 ranges, and a path it cannot create is an error naming the path
before any burst runs."""
import csv
import os
import resource
import subprocess
import time

import pytest

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
PROBE = os.path.join(TOOLS, "lab-mmap-probe")


def run(args, **kw):
    return subprocess.run([PROBE] + args, capture_output=True, text=True, timeout=20, **kw)


def read_histogram(path):
    with open(path, newline="") as f:
        reader = csv.reader(f)
        assert next(reader) == ["bucket_lo_us", "bucket_hi_us", "count"]
        return [tuple(int(v) for v in row) for row in reader]


def bucket(us):
    """The probe's bucket of a whole-microsecond latency: 0 is [0, 1),
    k is [2^(k-1), 2^k)."""
    return us.bit_length()


@pytest.fixture
def probed(tmp_path):
    lat, hist = tmp_path / "lat.csv", tmp_path / "hist.csv"
    p = run(["-s", "1", "-i", "5", "-d", "1", "-o", str(lat), "-H", str(hist)])
    assert p.returncode == 0, p.stderr
    with open(lat, newline="") as f:
        latencies = [int(r["latency_us"]) for r in csv.DictReader(f)]
    return latencies, read_histogram(hist)


def test_counts_sum_to_the_bursts_and_match_their_buckets(probed):
    latencies, hist = probed
    assert len(latencies) >= 20
    assert sum(c for _, _, c in hist) == len(latencies)
    expected = [0] * len(hist)
    for us in latencies:
        expected[bucket(us)] += 1
    assert [c for _, _, c in hist] == expected
    for us in latencies:
        lo, hi, _ = hist[bucket(us)]
        assert lo <= us < hi


def test_buckets_are_contiguous_log2_ranges_up_to_the_last_burst(probed):
    _, hist = probed
    assert hist[0][:2] == (0, 1)
    for k, (lo, hi, _) in enumerate(hist[1:], start=1):
        assert (lo, hi) == (2 ** (k - 1), 2 ** k)
    assert all(a[1] == b[0] for a, b in zip(hist, hist[1:]))
    # Written up to the highest non-empty bucket, and no further.
    assert hist[-1][2] > 0


def test_without_H_the_output_is_as_before(tmp_path):
    lat = tmp_path / "lat.csv"
    p = run(["-s", "1", "-i", "50", "-d", "1", "-o", str(lat)])
    assert p.returncode == 0, p.stderr
    assert os.listdir(tmp_path) == ["lat.csv"]
    lines = lat.read_text().splitlines()
    assert lines[0] == "start_s,latency_us"
    assert 5 <= len(lines) - 1 <= 25


def test_a_histogram_path_it_cannot_create_fails_at_once_naming_it(tmp_path):
    lat, bad = tmp_path / "lat.csv", tmp_path / "no/such/dir/hist.csv"
    # -d 60: failing only after the run would time the test out.
    p = run(["-s", "1", "-d", "60", "-o", str(lat), "-H", str(bad)])
    assert p.returncode == 1
    assert p.stderr == f"lab-mmap-probe: {bad}: No such file or directory\n"
    # No half-made run left behind: the latency file goes too.
    assert not lat.exists()


def test_an_existing_histogram_is_never_overwritten(tmp_path):
    hist = tmp_path / "hist.csv"
    hist.write_text("precious\n")
    p = run(["-s", "1", "-d", "1", "-o", str(tmp_path / "lat.csv"), "-H", str(hist)])
    assert p.returncode == 1
    assert f"lab-mmap-probe: {hist}: File exists" in p.stderr
    assert hist.read_text() == "precious\n"


def test_a_failed_mmap_still_writes_the_histogram_of_the_bursts_so_far(tmp_path):
    # A 64 MiB address-space limit makes the first 128 MiB mmap fail.
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (64 << 20, 64 << 20))

    lat, hist = tmp_path / "lat.csv", tmp_path / "hist.csv"
    p = run(["-s", "128", "-d", "1", "-o", str(lat), "-H", str(hist)], preexec_fn=limit)
    assert p.returncode == 1
    assert "lab-mmap-probe: mmap 128 MiB: Cannot allocate memory" in p.stderr
    assert lat.read_text() == "start_s,latency_us\n"
    assert read_histogram(hist) == [(0, 1, 0)]


def test_usage_names_the_option():
    p = run(["-x"])
    assert p.returncode == 2
    assert "[-H hist.csv]" in p.stderr


def test_a_probe_killed_mid_run_leaves_the_bursts_it_finished(tmp_path):
    """The memcg OOM killer picks the probe, the neighbour's largest
    task: the bursts done before SIGKILL must be in the file, whole."""
    lat = tmp_path / "lat.csv"
    p = subprocess.Popen([PROBE, "-s", "1", "-i", "50", "-d", "60", "-o", str(lat)],
                         stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (
                not lat.exists() or lat.read_text().count("\n") < 4):
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    text = lat.read_text()
    assert text.endswith("\n")
    rows = list(csv.DictReader(text.splitlines()))
    assert len(rows) >= 3
    assert all(float(r["start_s"]) > 0 and int(r["latency_us"]) > 0 for r in rows)


def test_sigterm_ends_the_probe_as_its_duration_would(tmp_path):
    """The runner ends the neighbour's phase with SIGTERM: the probe stops
    after the burst in progress, exits 0 and writes both files whole."""
    lat, hist = tmp_path / "lat.csv", tmp_path / "hist.csv"
    p = subprocess.Popen([PROBE, "-s", "1", "-i", "50", "-d", "60", "-o", str(lat),
                          "-H", str(hist)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (
            not lat.exists() or lat.read_text().count("\n") < 3):
        time.sleep(0.05)
    p.terminate()
    _, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    with open(lat, newline="") as f:
        latencies = [int(r["latency_us"]) for r in csv.DictReader(f)]
    assert len(latencies) >= 2
    assert sum(n for _, _, n in read_histogram(hist)) == len(latencies)
