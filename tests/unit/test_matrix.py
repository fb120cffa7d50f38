"""lab/matrix.sh without booting: the job list (complete, shuffled the
same way for the same seed, a GNU parallel input), bad names refused
before any run, and a job the ledger marks ok never run again."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATRIX = os.path.join(ROOT, "lab/matrix.sh")


def matrix(*args, results, seed="1"):
    env = dict(os.environ, MEMCG_LAB_RESULTS=str(results), MATRIX_SEED=seed)
    return subprocess.run([MATRIX] + list(args), capture_output=True, text=True,
                          timeout=60, env=env)


def jobs(results, seed="1"):
    p = matrix("jobs", "dirty-neighbour proactive", "vanilla mglru", "3",
               results=results, seed=seed)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_job_list_is_every_combination_once_as_shell_commands(tmp_path):
    lines = jobs(tmp_path)
    assert len(lines) == 2 * 2 * 3
    triples = {tuple(line.split()[-3:]) for line in lines}
    assert triples == {(s, a, str(r)) for s in ("dirty-neighbour", "proactive")
                       for a in ("vanilla", "mglru") for r in (1, 2, 3)}
    assert all(f"{MATRIX} one " in line for line in lines)
    assert all(f"MEMCG_LAB_RESULTS={tmp_path}" in line for line in lines)


def test_order_is_shuffled_and_reproducible(tmp_path):
    def order(seed):
        return [tuple(line.split()[-3:]) for line in jobs(tmp_path, seed)]
    first, again, other = order("1"), order("1"), order("2")
    assert first == again
    assert sorted(first) == sorted(other) and first != other
    assert first != sorted(first)


def test_bad_names_and_counts_are_refused_before_any_run(tmp_path):
    for args, msg in ((("nope", "vanilla", "1"), "unknown scenario 'nope'"),
                      (("proactive", "bogus", "1"), "unknown arm 'bogus'"),
                      (("proactive", "vanilla", "0"), "RUNS must be a positive integer")):
        p = matrix("run", *args, results=tmp_path)
        assert p.returncode == 2
        assert msg in p.stderr
    assert not (tmp_path / "matrix-ledger.csv").exists()


@pytest.mark.parametrize("result", ["ok", "kernel-trouble"])
def test_a_job_done_before_or_failed_by_the_kernel_is_never_run_again(tmp_path, result):
    # a kernel failure is a finding: counted, never retried
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        f"proactive,vanilla,2,{result},/x,2026-12-03T00:00:00Z,\n")
    p = matrix("one", "proactive", "vanilla", "2", results=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "done before" in p.stderr
    assert not (tmp_path / "proactive").exists()


def job_result(rc, folder):
    """matrix.sh's job_result, sourced without its last line (main)."""
    script = f"source <(sed '$d' {MATRIX}); job_result {rc} {folder}"
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                       cwd=os.path.dirname(MATRIX))
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_results_are_classified_from_the_run_status(tmp_path):
    panic = tmp_path / "panic"
    panic.mkdir()
    (panic / "status.txt").write_text(
        "result=failed\nreason=kernel trouble on the console: int3: 0000 [#1] PREEMPT SMP, x\n"
        "failure_kind=kernel\nkernel_trouble=int3: 0000 [#1] PREEMPT SMP\n")
    hang = tmp_path / "hang"
    hang.mkdir()
    (hang / "status.txt").write_text("result=failed\nreason=guest hang: no console output for 180 s\n"
                                     "failure_kind=kernel\nkernel_trouble=\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "status.txt").write_text("result=failed\nreason=scenario exit status 1 in the guest\n"
                                      "failure_kind=scenario\nkernel_trouble=\n")
    assert job_result(1, panic) == ["kernel-trouble",
                                    "kernel trouble on the console: int3: 0000 [#1] PREEMPT SMP; x"]
    assert job_result(1, hang)[0] == "kernel-trouble"
    assert job_result(1, other) == ["failed", "scenario exit status 1 in the guest"]
    assert job_result(0, other)[0] == "ok"
    (other / "status.txt").write_text("result=ok\nreason=\nfailure_kind=\n")
    assert job_result(0, other) == ["ok", ""]
    assert job_result(1, tmp_path / "none") == ["failed", "no status.txt"]
