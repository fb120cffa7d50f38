"""Assertions on a real run of the immediate-invariants scenario: the lab
kernel carries the patch series with CONFIG_LRU_IMMEDIATE=y, so the KTAP
report of its kselftest test_lru_immediate must be complete, run every
check of every test it did not skip for a known reason, and have no
failure; and the console must be free of kernel trouble.  On an XFS
stick (STICK_FS=xfs) the large-folio test must run, not skip.

LAB_INVARIANTS_RUN names the run folder (tests/run-tests.sh sets it)."""
import pytest

from memcg_lab import ktap
from run_folder import RunFolder

INVARIANTS = RunFolder("LAB_INVARIANTS_RUN")
pytestmark = INVARIANTS.skip
TAP = "kselftest-test_lru_immediate.tap"
FIXTURE = "lru_immediate"

# Every test of the program, in order, with the checks it makes when it
# runs (the TAP tests of the program it replaced, one check each; the
# toggle test's fourth is its "# known:" line; sibling and dirty_limit
# are new).  large makes 5 where large folios park (XFS), else 1 and
# skips.
CHECKS = {
    "policy_names": 3, "park": 12, "scan": 1, "toggle": 4, "rmdir": 3,
    "ops_fadvise_dontneed": 4, "ops_compact_memory": 4, "ops_mlock": 4,
    "ops_truncate": 4, "strand": 5, "mglru": 3, "showmem": 1, "sibling": 1,
    "dirty_limit": 1, "large": 5, "end_state": 3,
}
# The tests' groups (LRU_IMMEDIATE_TESTS, the scenario's TEST_ONLY).
GROUPS = {"policy_names": None, "end_state": None, "ops_fadvise_dontneed": "ops",
          "ops_compact_memory": "ops", "ops_mlock": "ops", "ops_truncate": "ops"}


def group(test):
    return GROUPS.get(test, test)


def report():
    return ktap.parse(INVARIANTS.read(TAP))


def on_xfs():
    return INVARIANTS.params().get("STICK_FS") == "xfs"


def selected(test):
    only = INVARIANTS.params().get("TEST_ONLY", "").replace(",", " ").split()
    return group(test) is None or not only or group(test) in only


def may_skip(test):
    """Why TEST may skip on the lab kernel: the scan test has no baseline
    when 6.1 OOM-killed activate's writer three times before its memcg
    scanned anything; vfat and ext4 make no large folios in 6.1, XFS
    does; and TEST_ONLY leaves groups out."""
    if not selected(test):
        return "is not in LRU_IMMEDIATE_TESTS"
    if test == "scan":
        return "OOM-killed before its memcg scanned anything"
    if test == "large" and not on_xfs():
        return "no large folio parked"
    return None


def test_the_ktap_report_is_complete():
    r = report()
    assert r.version == "TAP version 13"
    assert r.plans == [len(CHECKS)], "no single plan of every test"
    assert [t.number for t in r.tests] == list(range(1, len(CHECKS) + 1))
    assert [t.name for t in r.tests] == [f"{FIXTURE}.{name}" for name in CHECKS]
    assert r.totals is not None, "no '# Totals:' line: the program did not finish"
    assert r.totals["pass"] + r.totals["skip"] + r.totals["fail"] == len(CHECKS)


def test_no_test_failed_and_only_known_skips():
    r = report()
    assert [t.name for t in r.tests if t.result == "fail"] == []
    assert r.totals["fail"] == 0 and r.totals["error"] == 0
    for t in r.tests:
        assert t.checks_of("FAIL") == [], t.name
        # The lab kernel has the list-walk verifier and kpageflags.
        assert t.checks_of("skip") == [], t.name
        if t.result == "skip":
            why = may_skip(t.name.split(".", 1)[1])
            assert why and why in t.reason, f"{t.name} skipped: {t.reason}"
    assert sum(t.result == "pass" for t in r.tests) > 0


def test_every_test_that_ran_made_all_its_checks():
    for t in report().tests:
        name = t.name.split(".", 1)[1]
        want = CHECKS[name]
        if t.result == "skip":
            # Skipped at the start, but large, which skips at the end of
            # a run without large folios: its after-sync check ran.
            want = 1 if name == "large" and selected(name) else 0
        assert len(t.checks) == want, f"{t.name}: {t.checks}"
    toggle = report().test(f"{FIXTURE}.toggle")
    if toggle.result != "skip":
        assert len(toggle.checks_of("known")) == 1


def test_large_folios_were_parked_and_split_on_xfs():
    if not on_xfs():
        pytest.skip("the stick is not XFS")
    large = report().test(f"{FIXTURE}.large")
    assert large.result == "pass"
    passed = large.checks_of("pass")
    assert any(c.startswith("a reading writer parks large folios") for c in passed)
    assert any(c.startswith("debugfs split_huge_pages splits") for c in passed)


def test_the_run_passed_with_a_clean_console():
    status = INVARIANTS.status()
    assert status["result"] == "ok", status["reason"]
    assert status["kernel_trouble"] == ""
