"""analysis/memcg_lab/kselftest.py on hand-made run folders."""
import os
import subprocess

import pytest

from memcg_lab import kselftest

TAP_ROWS = "program,number,test,result\n"


def make_run(path, arm, rows):
    path.mkdir()
    (path / "provenance.txt").write_text(f"scenario=cgroup-selftests\narm={arm}\n")
    (path / "kselftest.csv").write_text(TAP_ROWS + "".join(
        f"{p},{n},{t},{r}\n" for n, (p, t, r) in enumerate(rows, start=1)))
    return str(path)


def test_results_are_counted_per_arm_and_differences_found(tmp_path):
    runs = [
        make_run(tmp_path / "a1", "activate", [("test_kmem", "basic", "pass"), ("test_kmem", "del", "pass")]),
        make_run(tmp_path / "a2", "activate", [("test_kmem", "basic", "pass"), ("test_kmem", "del", "pass")]),
        make_run(tmp_path / "i1", "immediate", [("test_kmem", "basic", "pass"), ("test_kmem", "del", "fail")]),
    ]
    results, n = kselftest.table(runs)
    assert n == {"activate": 2, "immediate": 1}
    assert results[("test_kmem", "del")] == {"activate": {"pass": 2}, "immediate": {"fail": 1}}
    assert kselftest.differing(results, n) == [("test_kmem", "del")]
    text = kselftest.format_table(results, n)
    assert "fail 1" in text and "pass 2" in text


def test_a_test_that_flips_within_an_arm_differs(tmp_path):
    runs = [make_run(tmp_path / "a1", "activate", [("test_core", "x", "pass")]),
            make_run(tmp_path / "a2", "activate", [("test_core", "x", "fail")])]
    results, n = kselftest.table(runs)
    assert kselftest.differing(results, n) == [("test_core", "x")]


def test_a_test_missing_from_a_run_differs(tmp_path):
    runs = [make_run(tmp_path / "a1", "activate", [("p", "x", "pass"), ("p", "y", "pass")]),
            make_run(tmp_path / "a2", "activate", [("p", "x", "pass")])]
    results, n = kselftest.table(runs)
    assert kselftest.differing(results, n) == [("p", "y")]


def test_bad_rows_and_missing_files_name_the_path(tmp_path):
    d = make_run(tmp_path / "a1", "activate", [])
    (tmp_path / "a1" / "kselftest.csv").write_text(TAP_ROWS + "p,1,x,maybe\n")
    with pytest.raises(kselftest.KselftestError, match="kselftest.csv:2"):
        kselftest.table([d])
    (tmp_path / "a1" / "kselftest.csv").write_text(TAP_ROWS + "p,1,x,pass\np,1,x,pass\n")
    with pytest.raises(kselftest.KselftestError, match="a second result for p test 1"):
        kselftest.table([d])
    (tmp_path / "a1" / "kselftest.csv").unlink()
    with pytest.raises(kselftest.KselftestError, match="missing"):
        kselftest.table([d])


GUEST_RUN = os.path.join(os.path.dirname(__file__), "../../scenarios/lib/guest-run.sh")


def test_the_guest_turns_kselftest_tap_into_the_csv_rows(tmp_path):
    # The format of 6.1's kselftest.h: pass, skip ("ok N # SKIP name"), fail.
    tap = ("TAP version 13\n1..3\nmemory.current = 1\nok 1 test_kmem_basic\n"
           "ok 2 # SKIP test_kmem_memcg_deletion\nnot ok 3 test_percpu_basic\n"
           "# Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0\n")
    script = 'source "$1" cgroup-selftests default; kselftest_tap_to_csv test_kmem'
    p = subprocess.run(["bash", "-c", script, "-", GUEST_RUN], input=tap,
                       capture_output=True, text=True, check=True)
    assert p.stdout.splitlines() == ["test_kmem,1,test_kmem_basic,pass",
                                     "test_kmem,2,test_kmem_memcg_deletion,skip",
                                     "test_kmem,3,test_percpu_basic,fail"]
