"""SET's shell-like quoting, on the real scripts without booting: a value
with spaces survives every hop (make -> run-scenario.sh's parser ->
params.env in the run folder -> the guest's resolve_parameters ->
params-resolved.env and the sysctls it applies, and make matrix-jobs ->
a job line's environment), and a malformed SET is refused naming the
bad word."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.path.join(ROOT, "lab")
sys.path.insert(0, os.path.join(ROOT, "analysis"))
from memcg_lab.run import load_parameters  # noqa: E402
from test_scenario_files import guest_parameters  # noqa: E402

SPACED = 'SYSCTLS="vm.dirty_ratio=60 vm.dirty_background_ratio=3" RUNS_S=30'


def run_scenario_function(script, set_value, env=None):
    """Bash with run-scenario.sh sourced without its last line (main)."""
    return subprocess.run(
        ["bash", "-c", f"source <(sed '$d' run-scenario.sh); NAME=dirty-neighbour ARM=activate; {script}"],
        capture_output=True, text=True, timeout=60, cwd=LAB,
        env={**os.environ, "SET": set_value, **(env or {})})


def assignments(set_value):
    p = run_scenario_function('check_arguments; printf "%s\\0" "${SET_ASSIGNMENTS[@]}"', set_value)
    assert p.returncode == 0, p.stderr
    return [a for a in p.stdout.split("\0") if a]


@pytest.mark.parametrize("set_value, expected", [
    (SPACED, ["SYSCTLS=vm.dirty_ratio=60 vm.dirty_background_ratio=3", "RUNS_S=30"]),
    ("SYSCTLS='vm.a=1  vm.b=2'", ["SYSCTLS=vm.a=1  vm.b=2"]),
    ('A="say \\"hi\\" \\\\ \\x"', ['A=say "hi" \\ \\x']),
    ("A=x\\ y\tB= C='' D=", ["A=x y", "B=", "C=", "D="]),
    ('KERNEL_CMDLINE_EXTRA="a=1 b" X=pre"mid dle"post', ["KERNEL_CMDLINE_EXTRA=a=1 b", "X=premid dlepost"]),
    ("", []),
])
def test_set_is_split_as_the_shell_splits_words(set_value, expected):
    assert assignments(set_value) == expected


@pytest.mark.parametrize("set_value, message", [
    ('SYSCTLS="vm.a=1 vm.b=2 RUNS_S=30',
     """SET has an unclosed " in 'SYSCTLS="vm.a=1 vm.b=2 RUNS_S=30'"""),
    ("A=1 B='x y", "SET has an unclosed ' in 'B='x y'"),
    ("SYSCTLS=vm.a=1 vm.b=2", "SET entries must be VAR=value, got 'vm.b=2' (a value with spaces is quoted"),
    ("A=1 B=2\\", "SET ends in a lone backslash: 'B=2\\'"),
    ('A="$(reboot)"', "SET values may not hold ; & | ` or $, got 'A=$(reboot)'"),
    ("A='x;y'", "SET values may not hold ; & | ` or $, got 'A=x;y'"),
    ("A=1\nB=2", "SET may not hold a newline"),
    ("lower=1", "SET entries must be VAR=value, got 'lower=1'"),
])
def test_a_malformed_set_is_refused_naming_the_bad_word(set_value, message):
    p = subprocess.run([os.path.join(LAB, "run-scenario.sh"), "--check", "dirty-neighbour", "activate"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SET": set_value})
    assert p.returncode == 2
    assert message in p.stderr


def guest_resolution(tmp_path, set_value):
    """params.env as run-scenario.sh writes it into the run folder, then
    read as the guest reads it: the runner's resolve_parameters (the
    runner sourced, which runs nothing) and apply_sysctls with
    sysctl recorded instead of run."""
    out = tmp_path / "run"
    out.mkdir()
    host = run_scenario_function(
        f"check_arguments; load_host_parameters; GUEST_CPUS=$(nproc); RUN={out}; write_guest_parameters",
        set_value)
    assert host.returncode == 0, host.stderr
    guest = subprocess.run(
        ["bash", "-c",
         "source scenarios/lib/guest-run.sh dirty-neighbour activate; "
         f"out_dir={out}; lab_dir=$PWD/scenarios; resolve_parameters; "
         f"sysctl() {{ printf '%s\\n' \"$3\" >>{out}/sysctl-calls; }}; apply_sysctls"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert guest.returncode == 0, guest.stderr
    return out


def test_a_value_with_spaces_reaches_the_guest_intact(tmp_path):
    out = guest_resolution(tmp_path, SPACED + " KERNEL_CMDLINE_EXTRA='a=1 b=2'")
    # one shell-quoted assignment a line
    assert "SYSCTLS=vm.dirty_ratio=60\\ vm.dirty_background_ratio=3\n" in (out / "params.env").read_text()
    params = load_parameters(str(out / "params-resolved.env"))
    assert params["SYSCTLS"] == "vm.dirty_ratio=60 vm.dirty_background_ratio=3"
    assert params["RUNS_S"] == "30"
    assert params["KERNEL_CMDLINE_EXTRA"] == "a=1 b=2"
    # each entry of the list is its own sysctl in the guest
    assert (out / "sysctl-calls").read_text().splitlines() == [
        "vm.dirty_ratio=60", "vm.dirty_background_ratio=3"]


def test_without_set_the_scenario_defaults_reach_the_guest(tmp_path):
    out = guest_resolution(tmp_path, "")
    params = load_parameters(str(out / "params-resolved.env"))
    assert params["SYSCTLS"] == "vm.dirty_ratio=80 vm.dirty_background_ratio=5 vm.compaction_proactiveness=0"
    assert params["KERNEL_FLAVOUR"] == "lab"


def test_params_resolved_holds_exactly_the_declared_parameters(tmp_path):
    """What params.env and the scenario files define (test_scenario_files
    resolves them in a bare bash), what resolve_parameters itself sets
    and the run's identity: no variable of the shell, of systemd or of
    the runner (whose globals are lower-case)."""
    out = guest_resolution(tmp_path, "RUNS_S=30")
    written = set(load_parameters(str(out / "params-resolved.env")))
    mem_mb = int(load_parameters(str(out / "params-resolved.env"))["MEM_MB"])
    declared = set(guest_parameters(ROOT, "dirty-neighbour", mem_mb, 1, ["RUNS_S=30"]))
    host = {"KERNEL_LABEL", "KERNEL_FLAVOUR", "KERNEL_SLOWDOWN", "GUEST_CPUS"}
    own = {"MEM_MB", "SAMPLE_MS", "SAMPLE_SLOW_MS", "SCENARIO", "ARM"}
    assert written == declared | host | own
    assert "RUNS_S" in written


def test_the_kernel_command_line_gets_every_word_of_a_spaced_value(tmp_path):
    p = run_scenario_function(
        "check_arguments; load_host_parameters; printf '%s' \"$KERNEL_CMDLINE_EXTRA\"",
        "KERNEL_CMDLINE_EXTRA='systemd.unified_cgroup_hierarchy=0 foo=1'")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "systemd.unified_cgroup_hierarchy=0 foo=1"


def make(*args, cwd=ROOT):
    return subprocess.run(["make", "-s", "-C", ROOT] + list(args),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("set_value", [SPACED, "SYSCTLS='vm.a=1 vm.b=2' X=it\\'s"])
def test_make_matrix_jobs_lines_carry_set_as_given(tmp_path, set_value):
    p = make("matrix-jobs", f"RESULTS={tmp_path}", "SCENARIOS=dirty-neighbour",
             "ARMS=activate", "RUNS=2", f"SET={set_value}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        # the line's own environment, run by the shell GNU parallel uses
        command = line.replace(f"{LAB}/matrix.sh one", "printenv SET #")
        shell = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)
        assert shell.stdout == set_value + "\n"


def test_make_matrix_jobs_refuses_a_malformed_set_before_listing(tmp_path):
    p = make("matrix-jobs", f"RESULTS={tmp_path}", "SCENARIOS=dirty-neighbour",
             "ARMS=activate", "RUNS=1", 'SET=SYSCTLS="vm.a=1 vm.b=2')
    assert p.returncode != 0
    assert p.stdout == ""
    assert "SET has an unclosed \"" in p.stderr
