"""The series' kselftest test_lru_immediate on the host side: the KTAP
parser the boot test reads it with; lab/build-kselftests.sh lru-immediate
on a made-up kernel repository (only the series' selftests parts are
applied, to a copy, keyed by the series); and the program itself on this
host's kernel, which has no patch series, so that every test must skip
before it touches anything."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from memcg_lab import ktap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KSFT = os.environ.get("LAB_LRU_IMMEDIATE_KSFT", "")

SAMPLE = """TAP version 13
1..3
# Starting 3 tests from 2 test cases.
#  RUN           lru_immediate.policy_names ...
# pass: policy accepts and reads back immediate
# FAIL: policy rejects an unknown name with EINVAL
# test_lru_immediate.c:160:policy_names:failed: policy rejects an unknown name with EINVAL
#          FAIL  lru_immediate.policy_names
not ok 1 lru_immediate.policy_names
#  RUN           lru_immediate.scan ...
# skip: a check: no verifier
#      SKIP      activate's writer was OOM-killed
#            OK  lru_immediate.scan
ok 2 # SKIP activate's writer was OOM-killed
#  RUN           lru_immediate.toggle ...
# known: ok: no memcg OOM kill (why)
#            OK  lru_immediate.toggle
ok 3 lru_immediate.toggle
# FAILED: 2 / 3 tests passed.
# Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0
"""


def test_ktap_results_take_their_names_from_the_run_lines():
    r = ktap.parse(SAMPLE)
    assert r.version == "TAP version 13"
    assert r.plans == [3]
    assert [(t.number, t.name, t.result) for t in r.tests] == [
        (1, "lru_immediate.policy_names", "fail"),
        (2, "lru_immediate.scan", "skip"),
        (3, "lru_immediate.toggle", "pass")]
    assert r.test("lru_immediate.scan").reason == "activate's writer was OOM-killed"
    assert r.totals == {"pass": 1, "fail": 1, "xfail": 0, "xpass": 0, "skip": 1, "error": 0}


def test_ktap_checks_belong_to_the_test_that_printed_them():
    r = ktap.parse(SAMPLE)
    names = r.test("lru_immediate.policy_names")
    assert names.checks == [("pass", "policy accepts and reads back immediate"),
                            ("FAIL", "policy rejects an unknown name with EINVAL")]
    assert r.test("lru_immediate.scan").checks_of("skip") == ["a check: no verifier"]
    assert r.test("lru_immediate.toggle").checks_of("known") == ["ok: no memcg OOM kill (why)"]


def test_an_unfinished_report_has_no_totals():
    r = ktap.parse("\n".join(SAMPLE.splitlines()[:9]))
    assert len(r.tests) == 1 and r.totals is None


# A made-up kernel tree: what lab/build-kselftests.sh archives, and a
# file outside tools/ that only the series' first patch changes.
TREE = {
    "mm/vmscan.c": "int vmscan;\n",
    "tools/testing/selftests/kselftest.h": "/* kselftest.h */\n",
    "tools/testing/selftests/kselftest_harness.h": "/* harness */\n",
    "tools/testing/selftests/clone3/clone3_selftests.h": "/* clone3 */\n",
    "tools/testing/selftests/pidfd/pidfd.h": "/* pidfd */\n",
    "tools/testing/selftests/cgroup/cgroup_util.c": "int cg_util(void) { return 0; }\n",
    "tools/testing/selftests/cgroup/Makefile": "TEST_GEN_PROGS = test_core\n",
}
TEST_C = '#include "../kselftest_harness.h"\nint main(void) { return %d; }\n'


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout


def commit(repo, files, message):
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def lab(tmp_path):
    """A lab root with lab/build-kselftests.sh and a two-patch series (the
    second adds the test), a kernel repository at its pristine tag, and
    a cache."""
    repo = tmp_path / "linux"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, TREE, "pristine")
    git(repo, "tag", "pristine")
    commit(repo, {"mm/vmscan.c": "int vmscan = 1;\n"}, "mm: a change")
    commit(repo, {"tools/testing/selftests/cgroup/test_lru_immediate.c": TEST_C % 0,
                  "tools/testing/selftests/cgroup/Makefile":
                  "TEST_GEN_PROGS = test_core\nTEST_GEN_PROGS += test_lru_immediate\n"},
           "selftests: the test")
    root = tmp_path / "labroot"
    (root / "lab").mkdir(parents=True)
    for name in ("build-kselftests.sh", "lib.sh"):
        shutil.copy(os.path.join(ROOT, "lab", name), root / "lab" / name)
    patches = root / "patches"
    patches.mkdir()
    git(repo, "format-patch", "-q", "-o", str(patches), "pristine")
    (patches / "series").write_text("".join(p + "\n" for p in sorted(os.listdir(patches))))
    # The worktree goes back to pristine: a build must not need it there.
    git(repo, "checkout", "-q", "pristine")
    return root, repo, tmp_path / "cache"


def build(lab, *args):
    root, repo, cache = lab
    env = dict(os.environ, MEMCG_LAB_CACHE=str(cache), MEMCG_LAB_KERNEL_REPO=str(repo))
    return subprocess.run([str(root / "lab/build-kselftests.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_series_test_is_built_from_its_selftests_parts_only(lab):
    root, repo, cache = lab
    head = git(repo, "rev-parse", "HEAD")
    p = build(lab, "lru-immediate")
    assert p.returncode == 0, p.stderr
    out = p.stdout.strip()
    assert os.path.dirname(out) == str(cache / "kselftest")
    assert os.path.basename(out).startswith("lru-immediate-")
    assert open(os.path.join(out, ".built")).read() == "test_lru_immediate\n"
    assert subprocess.run([os.path.join(out, "test_lru_immediate")]).returncode == 0
    # The kernel repository's worktree is left as it was.
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == ""
    # Built once per series: the second call only names the folder.
    mtime = os.stat(os.path.join(out, "test_lru_immediate")).st_mtime_ns
    assert build(lab, "lru-immediate").stdout.strip() == out
    assert os.stat(os.path.join(out, "test_lru_immediate")).st_mtime_ns == mtime


def test_another_series_is_built_into_another_folder(lab):
    root, repo, cache = lab
    first = build(lab, "lru-immediate").stdout.strip()
    patch = next(p for p in (root / "patches").iterdir() if p.name.startswith("0002"))
    patch.write_text(patch.read_text().replace("return 0;", "return 3;"))
    p = build(lab, "lru-immediate")
    assert p.returncode == 0, p.stderr
    second = p.stdout.strip()
    assert second != first
    assert subprocess.run([os.path.join(second, "test_lru_immediate")]).returncode == 3


def test_a_series_without_the_test_is_refused(lab):
    root, _, _ = lab
    (root / "patches/series").write_text(
        next(p.name for p in (root / "patches").iterdir() if p.name.startswith("0001")) + "\n")
    p = build(lab, "lru-immediate")
    assert p.returncode == 1
    assert "adds no tools/testing/selftests/cgroup/test_lru_immediate.c" in p.stderr


def test_an_unknown_set_is_a_usage_error(lab):
    assert build(lab, "bogus").returncode == 2


def program_tests():
    """The program's tests in order, as the series' selftest patch
    defines them (TEST_F and TEST_F_TIMEOUT of fixture lru_immediate)."""
    patches = glob.glob(os.path.join(
        ROOT, "patches", "*-selftests-cgroup-add-test_lru_immediate.patch"))
    assert len(patches) == 1, patches
    with open(patches[0]) as f:
        return re.findall(r"^\+TEST_F(?:_TIMEOUT)?\(lru_immediate, (\w+)", f.read(), re.M)


@pytest.mark.skipif(not KSFT, reason="LAB_LRU_IMMEDIATE_KSFT not set (tests/run-tests.sh builds it)")
def test_a_kernel_without_the_series_skips_every_test(tmp_path):
    assert not os.path.exists("/proc/sys/vm/reclaim_writeback_policy")
    env = dict(os.environ, LRU_IMMEDIATE_DIR=str(tmp_path))
    p = subprocess.run([os.path.join(KSFT, "test_lru_immediate")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    r = ktap.parse(p.stdout)
    names = program_tests()
    assert len(names) >= 15
    assert r.plans == [len(names)]
    assert [t.name for t in r.tests] == [f"lru_immediate.{n}" for n in names]
    assert {t.result for t in r.tests} == {"skip"}
    assert {t.reason for t in r.tests} == {
        "/proc/sys/vm/reclaim_writeback_policy: no patch series in this kernel"}
    assert all(t.checks == [] for t in r.tests)
    assert r.totals["skip"] == len(names) and r.totals["fail"] == 0
    assert os.listdir(tmp_path) == []
