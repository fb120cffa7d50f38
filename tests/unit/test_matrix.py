"""lab/matrix.sh without booting: the job list (complete, shuffled the
same way for the same seed, a GNU parallel input), bad names refused
before any run, and a job the ledger marks ok never run again."""
import os
import subprocess

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


def test_a_job_done_before_is_skipped(tmp_path):
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc\n"
        "proactive,vanilla,2,ok,/x,2026-12-03T00:00:00Z\n")
    p = matrix("one", "proactive", "vanilla", "2", results=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "done before" in p.stderr
    assert not (tmp_path / "proactive").exists()
