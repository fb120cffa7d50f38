"""lab/matrix.sh without booting: the job list (complete, shuffled the
same way for the same seed, a GNU parallel input), bad names refused
before any run, a job the ledger marks ok never run again; the verdict
matrix as `make matrix`'s default, the estimate printed before the
first job, and DEBUG=1 (the debug kernel, its own ledger and results
root, no mixing of flavours within a scenario's arm)."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATRIX = os.path.join(ROOT, "lab/matrix.sh")


def matrix(*args, results, seed="1"):
    env = dict(os.environ, MEMCG_LAB_RESULTS=str(results), MATRIX_SEED=seed,
               MEMCG_LAB_CACHE=str(results / "cache"))
    return subprocess.run([MATRIX] + list(args), capture_output=True, text=True,
                          timeout=60, env=env)


def jobs(results, seed="1"):
    p = matrix("jobs", "dirty-neighbour proactive", "default mglru", "3",
               results=results, seed=seed)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_job_list_is_every_combination_once_as_shell_commands(tmp_path):
    lines = jobs(tmp_path)
    assert len(lines) == 2 * 2 * 3
    triples = {tuple(line.split()[-3:]) for line in lines}
    assert triples == {(s, a, str(r)) for s in ("dirty-neighbour", "proactive")
                       for a in ("default", "mglru") for r in (1, 2, 3)}
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
    for args, msg in ((("nope", "default", "1"), "unknown scenario 'nope'"),
                      (("proactive", "bogus", "1"), "unknown arm 'bogus'"),
                      (("proactive", "default", "0"), "RUNS must be a positive integer")):
        p = matrix("run", *args, results=tmp_path)
        assert p.returncode == 2
        assert msg in p.stderr
    assert not (tmp_path / "matrix-ledger.csv").exists()


@pytest.mark.parametrize("result", ["ok", "kernel-trouble"])
def test_a_job_done_before_or_failed_by_the_kernel_is_never_run_again(tmp_path, result):
    # a kernel failure is a finding: counted, never retried
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        f"proactive,default,2,{result},/x,2026-12-03T00:00:00Z,\n")
    p = matrix("one", "proactive", "default", "2", results=tmp_path)
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


# The verdict matrix (issue 20): what `make matrix` runs without
# SCENARIOS, ARMS and RUNS.
VERDICT_SCENARIOS = {"dirty-neighbour", "dirty-many", "dirty-global", "dirty-self", "clean-control",
                     "pinned-floor", "paced", "proactive", "cgroup-v1", "dirty-neighbour-ext4"}
VERDICT_ARMS = {"activate", "keep", "immediate", "mglru", "dirtylimit"}


def make(*args):
    return subprocess.run(["make", "-s", "-C", ROOT] + list(args), capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                       if k not in ("ARMS", "RUNS", "RESULTS", "DEBUG")})


def job_triples(lines):
    return [tuple(line.split()[-3:]) for line in lines]


def test_make_matrix_defaults_to_the_verdict_matrix(tmp_path):
    p = make("matrix-jobs", f"RESULTS={tmp_path}")
    assert p.returncode == 0, p.stderr
    triples = job_triples(p.stdout.splitlines())
    assert len(triples) == len(set(triples)) == 10 * 5 * 5
    assert {s for s, _, _ in triples} == VERDICT_SCENARIOS
    assert {a for _, a, _ in triples} == VERDICT_ARMS
    assert {r for _, _, r in triples} == {"1", "2", "3", "4", "5"}
    # the lists live in matrix.sh alone; make help prints them from there
    help_text = make("help").stdout
    defaults = matrix("defaults", results=tmp_path).stdout
    assert {*defaults.splitlines()[0].split()[1:]} == VERDICT_SCENARIOS
    for line in defaults.splitlines():
        assert line in help_text
    with open(os.path.join(ROOT, "Makefile")) as f:
        assert "dirty-neighbour-ext4" not in f.read()


def test_each_default_can_be_overridden_alone(tmp_path):
    p = make("matrix-jobs", f"RESULTS={tmp_path}", "ARMS=mglru", "RUNS=2")
    assert p.returncode == 0, p.stderr
    triples = job_triples(p.stdout.splitlines())
    assert len(triples) == 10 * 2 and {a for _, a, _ in triples} == {"mglru"}
    p = make("matrix-jobs", f"RESULTS={tmp_path}", "SCENARIOS=paced")
    assert {s for s, _, _ in job_triples(p.stdout.splitlines())} == {"paced"}


def add_run(results, scenario, folder, elapsed, flavour="lab", result="ok"):
    run = results / scenario / folder
    run.mkdir(parents=True)
    (run / "status.txt").write_text(f"result={result}\nreason=\nfailure_kind=\naccel=tcg\n"
                                    f"kernel_flavour={flavour}\nelapsed_s={elapsed}\n")
    (run / "params-resolved.env").write_text(f"ARM=x\nKERNEL_FLAVOUR={flavour}\n")


def estimate(results, scenarios, arms, runs, debug=""):
    """matrix.sh's print_estimate of the shuffled job list, sourced
    without its last line (main): run mode would go on to boot."""
    script = (f"source <(sed '$d' {MATRIX}); mapfile -t j < <(job_list '{scenarios}' '{arms}' {runs}); "
              'print_estimate "${j[@]}"')
    env = dict(os.environ, MEMCG_LAB_RESULTS=str(results), MEMCG_LAB_DEBUG=debug,
               MEMCG_LAB_CACHE=str(results / "cache"))
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(MATRIX), env=env)
    assert p.returncode == 0, p.stderr
    return p.stderr


def record_durations(cache, entries):
    """Ok runs as run-scenario.sh records them on the host, appending
    each to the cache's run-durations.csv."""
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); "
              + "; ".join(f"NAME={s} KERNEL_FLAVOUR={f} ELAPSED_S={e} RUN=/r/{i} record_run_duration"
                          for i, (s, f, e) in enumerate(entries)))
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(MATRIX), env=dict(os.environ, MEMCG_LAB_CACHE=str(cache)))
    assert p.returncode == 0, p.stderr


def test_a_scenario_new_to_the_results_root_is_estimated_from_the_hosts_record(tmp_path):
    """A first matrix in a new results root once estimated 20 x 900 s
    (5 h, the timeout) for 65 min of dirty-neighbour runs: the host's
    record of ok runs elsewhere gives the estimate."""
    results = tmp_path / "new-root"
    results.mkdir()
    record_durations(results / "cache", [("dirty-neighbour", "lab", 190), ("dirty-neighbour", "lab", 210),
                                         ("dirty-neighbour", "lab", 200), ("dirty-neighbour", "debug", 900),
                                         ("proactive", "debug", 300)])
    rows = (results / "cache" / "run-durations.csv").read_text().splitlines()
    assert rows[0] == "scenario,flavour,elapsed_s,run" and len(rows) == 6
    assert rows[1] == "dirty-neighbour,lab,190,/r/0"
    err = estimate(results, "dirty-neighbour proactive", "keep", 2)
    assert ("dirty-neighbour: 2 x 200 s (none in " + str(results) + ": median of this host's "
            "last 3 ok lab run(s) elsewhere, " + str(results / "cache" / "run-durations.csv") + ")") in err
    assert f"proactive: 2 x 900 s (no earlier ok lab run in {results}: its TIMEOUT_S" in err


def test_the_estimate_uses_earlier_runs_of_the_scenario_else_its_timeout(tmp_path):
    for i, elapsed in enumerate((300, 100, 200)):  # any arm: median 200 s
        add_run(tmp_path, "dirty-neighbour", f"2026010{i}T000000Z-{('keep', 'mglru', 'keep')[i]}", elapsed)
    add_run(tmp_path, "dirty-neighbour", "20260104T000000Z-keep", 5000, result="failed")
    add_run(tmp_path, "dirty-neighbour", "20260105T000000Z-immediate", 9000, flavour="debug")
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        "dirty-neighbour,keep,1,ok,/x,2026-01-01T00:00:00Z,\n")
    err = estimate(tmp_path, "dirty-neighbour proactive", "keep mglru", 2)
    assert (f"matrix on kernel lab: 8 jobs, 7 to run, 1 done before "
            f"(ledger: {tmp_path}/matrix-ledger.csv)") in err
    assert f"dirty-neighbour: 3 x 200 s (median of 3 earlier ok lab run(s) in {tmp_path})" in err
    assert (f"proactive: 4 x 900 s (no earlier ok lab run in {tmp_path}: "
            "its TIMEOUT_S, an upper bound)") in err
    total = 3 * 200 + 4 * 900
    assert f"expected: 7 jobs x {total // 7} s on average = 1:10:00 of guest time" in err


def test_a_debug_estimate_counts_debug_runs_and_timeouts_only(tmp_path):
    add_run(tmp_path, "dirty-neighbour", "20260101T000000Z-keep", 200)
    add_run(tmp_path, "dirty-neighbour", "20260102T000000Z-keep", 700, flavour="debug")
    err = estimate(tmp_path, "dirty-neighbour proactive", "mglru", 1, debug="1")
    assert "matrix on kernel debug: 2 jobs, 2 to run, 0 done before" in err
    assert f"ledger: {tmp_path}/matrix-ledger-debug.csv" in err
    assert "dirty-neighbour: 1 x 700 s (median of 1 earlier ok debug run(s)" in err
    # KERNEL_SLOWDOWN 4 on the debug kernel: 4 x 900 s
    assert "proactive: 1 x 3600 s (no earlier ok debug run" in err


def test_make_matrix_prints_the_estimate_before_its_jobs(tmp_path):
    # every job done before: make matrix prints the plan and boots nothing
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        "paced,keep,1,ok,/x,2026-01-01T00:00:00Z,\npaced,keep,2,ok,/y,2026-01-01T00:00:00Z,\n")
    p = make("matrix", f"RESULTS={tmp_path}", "SCENARIOS=paced", "ARMS=keep", "RUNS=2")
    assert p.returncode == 0, p.stderr
    plan = p.stderr.index("matrix on kernel lab: 2 jobs, 0 to run, 2 done before")
    assert plan < p.stderr.index("[1/2] paced/keep #")
    assert "expected: 0 jobs" in p.stderr


def test_make_matrix_debug_runs_the_debug_kernel_with_its_own_ledger(tmp_path):
    (tmp_path / "matrix-ledger-debug.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        "paced,keep,1,ok,/x,2026-01-01T00:00:00Z,\n")
    p = make("matrix", "DEBUG=1", f"RESULTS={tmp_path}", "SCENARIOS=paced", "ARMS=keep", "RUNS=1")
    assert p.returncode == 0, p.stderr
    assert (f"matrix on kernel debug: 1 jobs, 0 to run, 1 done before "
            f"(ledger: {tmp_path}/matrix-ledger-debug.csv)") in p.stderr
    # job lines carry the flavour; a debug matrix defaults to its own root
    p = make("matrix-jobs", "DEBUG=1", "SCENARIOS=paced", "ARMS=keep", "RUNS=1")
    assert p.returncode == 0, p.stderr
    assert f"MEMCG_LAB_RESULTS={ROOT}/results-debug " in p.stdout
    assert "MEMCG_LAB_DEBUG=1 " in p.stdout
    p = make("matrix-jobs", f"RESULTS={tmp_path}", "SCENARIOS=paced", "ARMS=keep", "RUNS=1")
    assert "MEMCG_LAB_DEBUG='' " in p.stdout


def job_done(results, debug, *job):
    script = f"source <(sed '$d' {MATRIX}); job_done {' '.join(job)}"
    env = dict(os.environ, MEMCG_LAB_RESULTS=str(results), MEMCG_LAB_DEBUG=debug)
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          cwd=os.path.dirname(MATRIX), env=env).returncode == 0


def test_a_job_done_on_one_kernel_flavour_is_not_done_on_the_other(tmp_path):
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        "paced,keep,1,ok,/x,2026-01-01T00:00:00Z,\n")
    assert job_done(tmp_path, "", "paced", "keep", "1")
    assert not job_done(tmp_path, "1", "paced", "keep", "1")


def test_the_run_scenario_flavour_follows_memcg_lab_debug():
    run = os.path.join(ROOT, "lab/run-scenario.sh")
    for debug, flavour, timeout in (("", "lab", 900), ("1", "debug", 3600)):
        p = subprocess.run([run, "--host-parameters", "paced", "keep"], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, MEMCG_LAB_DEBUG=debug))
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == [f"KERNEL_FLAVOUR={flavour}", f"TIMEOUT_S={timeout}"]


@pytest.mark.parametrize("debug, other", [("1", "lab"), ("", "debug")])
def test_a_matrix_refuses_to_mix_kernel_flavours_in_one_scenario_and_arm(tmp_path, debug, other):
    add_run(tmp_path, "paced", "20260101T000000Z-keep", 200, flavour=other)
    env_debug = {"MEMCG_LAB_DEBUG": debug}
    p = subprocess.run([MATRIX, "jobs", "paced", "keep mglru", "1"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, MEMCG_LAB_RESULTS=str(tmp_path), **env_debug))
    assert p.returncode == 1
    assert f"{tmp_path}/paced/20260101T000000Z-keep ({other})" in p.stderr
    assert "make report would exclude one flavour as mixed" in p.stderr
    assert p.stdout == ""
    # another arm of the scenario holds no run: nothing mixes
    p = subprocess.run([MATRIX, "jobs", "paced", "mglru", "1"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, MEMCG_LAB_RESULTS=str(tmp_path), **env_debug))
    assert p.returncode == 0, p.stderr
