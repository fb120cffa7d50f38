"""The guest runner's structure (scenarios/lib/guest-run.sh's header):
each runner module lists its functions in its header, under "API:"
(a shape may call them) or "Private:" (only the runner does); a shape,
scenarios/shapes/<shape>.sh, defines shape_<shape> and helpers of its
own, and calls only the API and those helpers; every shape a scenario
names exists; sourced, the runner runs nothing, executed it runs.

Functions are found as bash finds them: the runner is sourced, and
`declare -F` under extdebug says which file defined each; a function's
calls are the words of its body as `declare -f` prints it (no
comments)."""
import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = os.path.join(ROOT, "scenarios")
LIB = os.path.join(SCENARIOS, "lib")
SHAPES = os.path.join(SCENARIOS, "shapes")
GUEST_RUN = os.path.join(LIB, "guest-run.sh")

# Every function the sourced runner defines: "name<TAB>file<TAB>words".
SOURCED = r'''
source scenarios/lib/guest-run.sh smoke default
shopt -s extdebug
for f in $(declare -F | awk '{print $3}'); do
	file=$(declare -F "$f" | cut -d' ' -f3-)
	words=$(declare -f "$f" | tail -n +2 | { grep -oE '[A-Za-z_][A-Za-z0-9_]*' || true; } |
		sort -u | paste -sd' ')
	printf '%s\t%s\t%s\n' "$f" "$(realpath "$file")" "$words"
done
'''


def bash(script, cwd=ROOT, **kwargs):
    return subprocess.run(["bash", "-c", "set -euo pipefail; " + script], capture_output=True,
                          text=True, timeout=60, cwd=cwd, **kwargs)


@pytest.fixture(scope="module")
def functions():
    """{name: (file relative to the repository, set of words of its body)}"""
    p = bash(SOURCED)
    assert p.returncode == 0, p.stderr
    got = {}
    for line in p.stdout.splitlines():
        name, path, words = line.split("\t")
        got[name] = (os.path.relpath(path, ROOT), set(words.split()))
    return got


def definitions(path):
    """The names a file defines as `name() {` (the lab's one style)."""
    with open(path) as f:
        return re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)\(\) \{", f.read(), re.M)


def header_lists(path):
    """{"API": [names], "Private": [names]} of a runner file: the lines
    "#   name ..." under a "# API:" or "# Private:" line (a description
    that runs on is indented further)."""
    lists, current = {"API": [], "Private": []}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"# (API|Private):$", line.rstrip("\n"))
            if m:
                current = m.group(1)
                continue
            if current and re.match(r"#    ", line):
                continue
            m = re.match(r"#   ([A-Za-z_][A-Za-z0-9_]*)\b", line)
            if current and m:
                lists[current].append(m.group(1))
            else:
                current = None
    return lists


def shape_files():
    return sorted(glob.glob(os.path.join(SHAPES, "*.sh")))


def rel(path):
    return os.path.relpath(path, ROOT)


def runner_files(functions):
    return sorted({f for f, _ in functions.values() if f.startswith("scenarios/lib/")})


def api(functions):
    return {n for f in runner_files(functions) for n in header_lists(os.path.join(ROOT, f))["API"]}


def test_each_runner_file_lists_each_of_its_functions_once(functions):
    files = runner_files(functions)
    assert set(files) == {"scenarios/lib/" + m for m in (
        "guest-run.sh", "log.sh", "params.sh", "disks.sh", "cgroups.sh", "instruments.sh",
        "workloads.sh")}
    for f in files:
        lists = header_lists(os.path.join(ROOT, f))
        listed = lists["API"] + lists["Private"]
        defined = [n for n, (where, _) in functions.items() if where == f]
        assert sorted(listed) == sorted(set(listed)), f"{f}: a function listed twice"
        assert sorted(listed) == sorted(defined), \
            f"{f}: its header lists {sorted(set(listed) - set(defined))} it does not define " \
            f"and does not list {sorted(set(defined) - set(listed))}"


def test_every_function_is_defined_once_where_bash_finds_it(functions):
    # A second definition in a later file would replace the first
    # without a word: every `name() {` must be the one bash keeps.
    for path in glob.glob(os.path.join(LIB, "*.sh")) + shape_files():
        if os.path.basename(path) in ("arms.sh", "neighbour.sh"):
            continue   # loaded by apply_arm, and the neighbour's own script
        for name in definitions(path):
            assert functions[name][0] == rel(path), \
                f"{rel(path)} defines {name}, which {functions[name][0]} defines again"


def test_each_shape_file_holds_its_shape_and_only_its_own_helpers(functions):
    assert shape_files()
    for path in shape_files():
        shape = "shape_" + os.path.basename(path)[:-3].replace("-", "_")
        defined = definitions(path)
        assert shape in defined, f"{rel(path)} does not define {shape}"
        assert [n for n in defined if n.startswith("shape_")] == [shape], rel(path)
    assert {n for n in functions if n.startswith("shape_")} == {
        "shape_" + os.path.basename(p)[:-3].replace("-", "_") for p in shape_files()}


def test_shapes_call_only_the_runner_api_and_their_own_helpers(functions):
    """Every word of a shape file's functions that names a runner
    function names one of the API; none names another shape's function
    or a function of arms.sh (the arms table's reader, the runner's)."""
    offered = api(functions)
    arms = set(definitions(os.path.join(LIB, "arms.sh")))
    wrong = []
    for path in shape_files():
        mine = rel(path)
        for name, (where, words) in functions.items():
            if where != mine:
                continue
            for w in sorted(words - {name}):
                if w in arms:
                    wrong.append(f"{mine}: {name} calls {w}, of lib/arms.sh")
                elif w not in functions:
                    continue
                elif functions[w][0].startswith("scenarios/lib/") and w not in offered:
                    wrong.append(f"{mine}: {name} calls {w}, private to {functions[w][0]}")
                elif functions[w][0].startswith("scenarios/shapes/") and functions[w][0] != mine:
                    wrong.append(f"{mine}: {name} calls {w}, a helper of {functions[w][0]}")
    assert not wrong, "\n".join(wrong)


def test_the_runner_calls_no_shape(functions):
    # Only guest-run.sh's top level runs shape_$SHAPE, by name.
    wrong = [f"{where}: {name} calls {w}" for name, (where, words) in functions.items()
             if where.startswith("scenarios/lib/")
             for w in words if w in functions and functions[w][0].startswith("scenarios/shapes/")]
    assert not wrong, "\n".join(wrong)


def test_the_api_lists_only_functions_the_shapes_can_reach(functions):
    # Names in an API list that no file defines would pass the check
    # above for a shape that calls a misspelt name.
    assert api(functions) <= set(functions)


def test_every_scenario_names_a_shape_that_exists(functions):
    # SHAPE as the host resolves it (run-scenario.sh's
    # load_host_parameters, sourced without its last line, main, as
    # test_set_quoting.py does), every scenario in its own subshell.
    names = sorted(os.path.basename(p)[:-len(".scenario")]
                   for p in glob.glob(os.path.join(SCENARIOS, "*.scenario")))
    script = ("source <(sed '$d' run-scenario.sh); "
              "for NAME in " + " ".join(names) + "; do "
              "(ARM=default; check_arguments; load_host_parameters; "
              "printf '%s %s\\n' \"$NAME\" \"$SHAPE\"); done")
    p = bash(script, cwd=os.path.join(ROOT, "lab"),
             env={k: v for k, v in os.environ.items() if k != "SET"})
    assert p.returncode == 0, p.stderr
    shapes = dict(line.split() for line in p.stdout.splitlines())
    assert sorted(shapes) == names
    for scenario, shape in shapes.items():
        assert "shape_" + shape.replace("-", "_") in functions, \
            f"{scenario}.scenario: SHAPE={shape}, but no scenarios/shapes/{shape}.sh defines it"


def test_sourced_the_runner_runs_nothing_executed_it_runs(tmp_path):
    # record_guest_provenance's first command, a cp, stubbed to say so
    # and fail: the executed runner stops there, the sourced one never
    # gets there.
    stub = tmp_path / "cp"
    stub.write_text('#!/bin/sh\necho "cp $*" >&2\nexit 1\n')
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    p = subprocess.run([GUEST_RUN, "smoke", "default"], capture_output=True, text=True,
                       timeout=60, env=env, cwd=tmp_path)
    assert p.returncode == 1 and "cp /proc/cmdline /results/cmdline.txt" in p.stderr, p.stderr
    # a command that fails under set -e is named, as die names it
    assert 'error: the runner stopped (status 1) on: cp /proc/cmdline "$out_dir/cmdline.txt"' \
        in p.stdout, p.stdout
    p = subprocess.run(["bash", "-c", f"source '{GUEST_RUN}' smoke default; echo sourced"],
                       capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "sourced\n" and "cp " not in p.stderr, p.stderr


def test_a_shape_declares_its_measured_phase_once(tmp_path):
    """phase_begin NAME measured records the phase the run measures in
    guest-state.txt (the analysis reads it instead of guessing); a
    second declaration in one run is an error naming both."""
    stubs = ("throttle_hist_start() { :; }; lock_hist_start() { :; }; "
             "record_stick_bdi() { :; }; uptime_s() { echo 1.00; }; ")
    script = (f"source scenarios/lib/guest-run.sh smoke default; {stubs}"
              f"out_dir={tmp_path}; scope_pid=(); "
              "phase_begin ramp; phase_begin neighbour measured; phase_begin tail; "
              "phase_begin again measured")
    p = bash(script)
    assert p.returncode == 1
    assert "error: phase again declared measured after phase neighbour" in p.stdout, p.stdout
    assert (tmp_path / "guest-state.txt").read_text() == "measured_phase=neighbour\n"
