"""tests/guest/immediate_test on the host: only its refusals, which stop
before it touches anything (bad arguments; a kernel without the patch
series, which this host's kernel is)."""
import os
import subprocess

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
TEST = os.path.join(TOOLS, "immediate_test")


def run(*args):
    return subprocess.run([TEST] + list(args), capture_output=True, text=True, timeout=30)


def test_missing_or_inconsistent_arguments_are_usage_errors(tmp_path):
    for args in ((), ("-d", str(tmp_path)), ("-d", str(tmp_path), "-c", str(tmp_path), "-m", "64", "-f", "100")):
        p = run(*args)
        assert p.returncode == 2
        assert "usage: immediate_test" in p.stderr


def test_a_kernel_without_the_series_skips_the_whole_plan(tmp_path):
    assert not os.path.exists("/proc/sys/vm/reclaim_writeback_policy")
    p = run("-d", str(tmp_path), "-c", str(tmp_path))
    assert p.returncode == 0
    assert p.stdout.splitlines() == [
        "TAP version 13",
        "1..0 # SKIP /proc/sys/vm/reclaim_writeback_policy: no patch series in this kernel"]
    assert os.listdir(tmp_path) == []
