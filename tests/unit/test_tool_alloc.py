"""lab-alloc on the host: small real runs (a few MiB, its own smaps) with
fake meminfo and vmstat files, the CSV output, and the error paths: a
failing mmap, missing files named, vmstat keys the kernel lacks."""
import csv
import os
import subprocess

import pytest

TOOLS = os.environ.get("LAB_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
TOOL = os.path.join(TOOLS, "lab-alloc")
KEYS = ["size_mib", "madv_hugepage", "elapsed_s", "user_s", "sys_s", "anon_huge_kb",
        "thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_success",
        "compact_fail"]
VMSTAT = ("nr_free_pages 1000\nthp_fault_alloc 7\nthp_fault_fallback 2\n"
          "compact_stall 3\ncompact_success 1\ncompact_fail 2\n")


@pytest.fixture
def fakes(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:           8192 kB\nMemFree: 1 kB\n")
    (tmp_path / "vmstat").write_text(VMSTAT)
    return tmp_path


def run(args):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=60)


def kv(text):
    return dict(line.split("=", 1) for line in text.splitlines())


def test_default_size_is_memtotal_and_output_is_key_value(fakes):
    p = run(["-m", str(fakes / "meminfo"), "-v", str(fakes / "vmstat")])
    assert p.returncode == 0, p.stderr
    out = kv(p.stdout)
    assert list(out) == KEYS
    assert out["size_mib"] == "8"
    assert out["madv_hugepage"] == "0"
    assert float(out["elapsed_s"]) > 0
    # Its own smaps: the mapping is found, whatever THP backs it.
    assert int(out["anon_huge_kb"]) >= 0
    # A fake vmstat does not move: the deltas are 0.
    assert [out[k] for k in KEYS[6:]] == ["0"] * 5


def test_missing_vmstat_keys_are_not_available(fakes):
    (fakes / "vmstat").write_text("thp_fault_alloc 7\nthp_fault_fallback 2\n")
    p = run(["-s", "2", "-v", str(fakes / "vmstat")])
    assert p.returncode == 0, p.stderr
    out = kv(p.stdout)
    assert out["thp_fault_alloc"] == "0"
    assert out["compact_stall"] == out["compact_fail"] == "not available"


def test_a_smaps_without_the_mapping_is_not_available(fakes):
    (fakes / "smaps").write_text("00400000-00452000 r-xp 00000000 08:02 173521 /bin/x\n"
                                 "AnonHugePages:      2048 kB\n")
    p = run(["-s", "2", "-v", str(fakes / "vmstat"), "-S", str(fakes / "smaps")])
    assert p.returncode == 0, p.stderr
    assert kv(p.stdout)["anon_huge_kb"] == "not available"


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"),
                    reason="host kernel without THP")
def test_madv_hugepage(fakes):
    p = run(["-s", "8", "-H", "-v", str(fakes / "vmstat")])
    assert p.returncode == 0, p.stderr
    assert kv(p.stdout)["madv_hugepage"] == "1"


def test_csv_output_and_never_overwritten(fakes):
    out = fakes / "alloc.csv"
    p = run(["-s", "2", "-v", str(fakes / "vmstat"), "-o", str(out)])
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and list(rows[0]) == KEYS
    assert rows[0]["size_mib"] == "2"
    p = run(["-s", "2", "-v", str(fakes / "vmstat"), "-o", str(out)])
    assert p.returncode == 1
    assert f"lab-alloc: {out}: File exists" in p.stderr


def test_mmap_failure_reports_size_and_errno(fakes):
    # 256 TiB: beyond a 47-bit user address space whatever the overcommit.
    p = run(["-s", str(1 << 28), "-v", str(fakes / "vmstat")])
    assert p.returncode == 1
    assert "lab-alloc: mmap 268435456 MiB: Cannot allocate memory" in p.stderr


def test_missing_files_are_errors_naming_them(fakes):
    p = run(["-s", "2", "-v", str(fakes / "nope")])
    assert p.returncode == 1
    assert f"lab-alloc: {fakes}/nope: No such file or directory" in p.stderr
    (fakes / "meminfo").write_text("MemFree: 1 kB\n")
    p = run(["-m", str(fakes / "meminfo"), "-v", str(fakes / "vmstat")])
    assert p.returncode == 1
    assert f"lab-alloc: {fakes}/meminfo: no MemTotal line" in p.stderr
    p = run(["-s", "2", "-v", str(fakes / "vmstat"), "-S", str(fakes / "nope")])
    assert p.returncode == 1
    assert f"{fakes}/nope" in p.stderr


@pytest.mark.parametrize("args", [["-s", "0"], ["-s", "x"], ["extra"], ["-q"]])
def test_usage_errors_exit_2(args):
    p = run(args)
    assert p.returncode == 2
    assert "lab-alloc" in p.stderr
