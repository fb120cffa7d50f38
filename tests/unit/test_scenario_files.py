"""Scenario files are data: a header, SHAPE=, `: "${VAR:=default}"` lines
and the base fragments they source (scenarios/base/*.env).  Without
booting, every scenario is resolved as the guest resolves it (for several
MemTotal sizes and KERNEL_SLOWDOWN values) and as the host does
(lab/run-scenario.sh's load_host_parameters, on the lab and the debug
kernel), and compared with tests/fixtures/scenario-parameters.json; SET
must win over a scenario's values and its bases'; the bases are not
scenarios; a base's edit changes the layout key; the files pass
shellcheck.

The golden file was first written from the scenario files as they were
before scenarios/base/ (each a full copy of its defaults), so the bases
were proven to change nothing.  When a default changes on purpose, or a
scenario is added, regenerate it and read its diff with the change:

    /usr/bin/python3 tests/unit/test_scenario_files.py --write-golden
    git diff tests/fixtures/scenario-parameters.json

(`--write-golden DIR` resolves another checkout's lab/ and scenarios/,
e.g. a `git archive` of an older commit.)"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "scenario-parameters.json")
# The guest's MemTotal in MiB (MEM_MB) and KERNEL_SLOWDOWN values resolved.
MEM_MBS = (512, 1024, 2048)
SLOWDOWNS = (1, 3)

# What the guest holds when resolve_parameters (scenarios/lib/guest-run.sh)
# sources a scenario: MEM_MB, then params.env (the host's KERNEL_* and
# GUEST_CPUS, then SET), then SCENARIO_DIR; the file is read under
# `set -euo pipefail`.  Prints the upper-case variables it leaves that a
# bare bash does not have, NUL-separated; SCENARIO_DIR (a path) is left out.
GUEST_RESOLVE = r'''
set -euo pipefail
bash_own=" $(compgen -v | tr '\n' ' ') "
scenario_dir=$1 name=$2
shift 2
for kv in "$@"; do
	declare -- "$kv"
done
SCENARIO_DIR=$scenario_dir
. "$SCENARIO_DIR/$name.scenario"
for v in $(compgen -v); do
	if [[ $v =~ ^[A-Z][A-Z0-9_]*$ && $v != BASH* && $v != SCENARIO_DIR && $bash_own != *" $v "* ]]; then
		printf '%s=%s\0' "$v" "${!v}"
	fi
done
'''


def guest_inputs(mem_mb, slowdown):
    return {"MEM_MB": str(mem_mb), "KERNEL_LABEL": "lab", "KERNEL_FLAVOUR": "lab",
            "KERNEL_SLOWDOWN": str(slowdown), "GUEST_CPUS": "2"}


def parse(out):
    return dict(kv.split("=", 1) for kv in out.split("\0") if kv)


def guest_parameters(root, name, mem_mb, slowdown, set_words=()):
    """The scenario's parameters in a clean `env -i bash`, less the
    inputs it was given (unless it changed them)."""
    inputs = guest_inputs(mem_mb, slowdown)
    words = [f"{k}={v}" for k, v in inputs.items()] + list(set_words)
    p = subprocess.run(["env", "-i", "bash", "--noprofile", "--norc", "-c", GUEST_RESOLVE, "bash",
                        os.path.join(root, "scenarios"), name] + words,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"{name}: {p.stderr}"
    return {k: v for k, v in parse(p.stdout).items() if inputs.get(k) != v}


# The host's own reading: run-scenario.sh's functions, check_arguments
# (SET split into words), then load_host_parameters; prints what the
# latter added (SCENARIO_DIR left out).
HOST_RESOLVE = r'''
source <(sed '$d' run-scenario.sh)
NAME=$1 ARM=default
check_arguments
before=" $(compgen -v | tr '\n' ' ') "
load_host_parameters
for v in $(compgen -v); do
	if [[ $v =~ ^[A-Z][A-Z0-9_]*$ && $v != BASH* && $v != SCENARIO_DIR && $before != *" $v "* ]]; then
		printf '%s=%s\0' "$v" "${!v}"
	fi
done
'''


def host_parameters(root, name, flavour, set_value=""):
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "SET": set_value,
           "MEMCG_LAB_CACHE": "/nonexistent/memcg-lab-cache"}
    if flavour == "debug":
        env["MEMCG_LAB_DEBUG"] = "1"
    p = subprocess.run(["bash", "-c", HOST_RESOLVE, "bash", name], capture_output=True, text=True,
                       timeout=60, cwd=os.path.join(root, "lab"), env=env)
    assert p.returncode == 0, f"{name} ({flavour}): {p.stderr}"
    return parse(p.stdout)


def scenarios(root=ROOT):
    return sorted(f[:-len(".scenario")] for f in os.listdir(os.path.join(root, "scenarios"))
                  if f.endswith(".scenario"))


def case(mem_mb, slowdown):
    return f"MEM_MB={mem_mb} KERNEL_SLOWDOWN={slowdown}"


def resolve_all(root):
    return {
        "guest": {name: {case(m, s): guest_parameters(root, name, m, s)
                         for m in MEM_MBS for s in SLOWDOWNS}
                  for name in scenarios(root)},
        "host": {name: {f: host_parameters(root, name, f) for f in ("lab", "debug")}
                 for name in scenarios(root)},
    }


def golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.mark.parametrize("name", scenarios())
def test_every_scenario_resolves_in_the_guest_as_the_golden_file(name):
    want = golden()["guest"]
    assert name in want, f"{name} is not in {GOLDEN}: regenerate it (this file's docstring)"
    for m in MEM_MBS:
        for s in SLOWDOWNS:
            assert guest_parameters(ROOT, name, m, s) == want[name][case(m, s)], (name, m, s)


@pytest.mark.parametrize("name", scenarios())
def test_every_scenario_resolves_on_the_host_as_the_golden_file(name):
    want = golden()["host"][name]
    for flavour in ("lab", "debug"):
        assert host_parameters(ROOT, name, flavour) == want[flavour], (name, flavour)


def test_the_golden_file_has_no_scenario_that_is_gone():
    assert sorted(golden()["guest"]) == scenarios() == sorted(golden()["host"])


# Sets each given variable, in turn, before the scenario (as SET does)
# and prints the value it ends with.
SET_EACH = r'''
set -euo pipefail
SCENARIO_DIR=$1 name=$2
shift 2
MEM_MB=1024 KERNEL_SLOWDOWN=1
for v in "$@"; do
	(declare -- "$v=7"; . "$SCENARIO_DIR/$name.scenario"; printf '%s=%s\0' "$v" "${!v}")
done
'''


@pytest.mark.parametrize("name", scenarios())
def test_set_wins_over_the_scenario_and_its_bases(name):
    # 7: a number, as the defaults computed from a variable need.
    names = sorted(set(guest_parameters(ROOT, name, 1024, 1)) - {"SHAPE"})
    p = subprocess.run(["env", "-i", "bash", "--noprofile", "--norc", "-c", SET_EACH, "bash",
                        os.path.join(ROOT, "scenarios"), name] + names,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert parse(p.stdout) == {n: "7" for n in names}


def test_set_reaches_the_host_through_a_base():
    assert host_parameters(ROOT, "dirty-neighbour-ext4", "lab", "STICK_SIZE_MB=99 STICK_FS=xfs")[
        "STICK_SIZE_MB"] == "99"
    assert host_parameters(ROOT, "dirty-neighbour", "lab", "GUEST_MEM_MB=2048")["STICK_SIZE_MB"] == "4608"


def scenario_lines():
    base = os.path.join(ROOT, "scenarios", "base")
    files = [os.path.join(ROOT, "scenarios", f"{n}.scenario") for n in scenarios()]
    files += [os.path.join(base, f) for f in sorted(os.listdir(base))]
    for path in files:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                yield os.path.relpath(path, ROOT), n, line.rstrip("\n")


# A scenario file or base holds comments, the shape (scenario files
# only), defaults a SET can override, and the fragments it builds on.
DATA_LINE = re.compile(r'(#.*|: "\$\{[A-Z][A-Z0-9_]*:=.*\}"|\. "\$SCENARIO_DIR/[a-z0-9./-]+"|)$')
SHAPE_LINE = re.compile(r"SHAPE=[a-z0-9-]+$")


def test_scenario_files_and_bases_hold_data_lines_only():
    bad = [(path, n, line) for path, n, line in scenario_lines()
           if not DATA_LINE.match(line)
           and not (path.endswith(".scenario") and SHAPE_LINE.match(line))]
    assert bad == []


DEFAULT = re.compile(r': "\$\{([A-Z][A-Z0-9_]*):=(.*)\}"$')
SOURCE = re.compile(r'\. "\$SCENARIO_DIR/(.+)"$')


def defaults_and_sources(rel):
    """A scenario's or base's own defaults {VAR: text} and what it sources."""
    defaults, sources = {}, []
    with open(os.path.join(ROOT, "scenarios", rel)) as f:
        for line in f:
            if m := DEFAULT.match(line.rstrip("\n")):
                defaults.setdefault(m.group(1), m.group(2))
            elif m := SOURCE.match(line.rstrip("\n")):
                sources.append(m.group(1))
    return defaults, sources


def sourced_defaults(rel):
    """{VAR: (text, file)} of everything rel sources, transitively."""
    found = {}
    for src in defaults_and_sources(rel)[1]:
        for var, (text, where) in sourced_defaults(src).items():
            found.setdefault(var, (text, where))
        for var, text in defaults_and_sources(src)[0].items():
            found.setdefault(var, (text, src))
    return found


# A default a scenario states again, word for word, although a file it
# sources has it: needed where another of its defaults is computed from
# it before that file is read (scenario lines come first, so that they
# win).  Any other is a copy to delete; and when the base's default
# changes, the scenario's must change with it.
RESTATED = {("sampler-cost", "GUEST_MEM_MB", "base/machine.env"),
            ("sampler-cost", "RAMP_MAX_S", "base/dirtier.env"),
            ("writeback-cp", "GUEST_MEM_MB", "base/machine.env")}


def test_a_scenario_restates_a_sourced_default_only_where_it_must():
    restated = set()
    for name in scenarios():
        own, _ = defaults_and_sources(f"{name}.scenario")
        for var, (text, where) in sourced_defaults(f"{name}.scenario").items():
            if own.get(var) == text:
                restated.add((name, var, where))
    assert restated == RESTATED


def test_base_fragments_are_not_scenarios():
    bases = os.listdir(os.path.join(ROOT, "scenarios", "base"))
    assert bases and all(b.endswith(".env") for b in bases)
    p = subprocess.run(["make", "-s", "-C", ROOT, "help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    listed = [line for line in p.stdout.splitlines() if line.startswith("scenarios: ")]
    assert listed == ["scenarios: " + " ".join(scenarios())]


def test_a_base_fragments_edit_changes_the_layout_key_of_its_scenarios(tmp_path):
    """The layout key hashes scenarios/ whole (run-scenario.sh's
    layout_key): an edit to a base changes the recipe of every scenario
    that sources it."""
    root = tmp_path / "root"
    for d in ("lab", "scenarios"):
        shutil.copytree(os.path.join(ROOT, d), root / d)
    kbuild = tmp_path / "kbuild"
    kbuild.mkdir()
    shutil.copy("/bin/true", kbuild / "vmlinux")

    def key(name):
        script = (f"source <(sed '$d' run-scenario.sh); NAME={name}; SET_ASSIGNMENTS=(); "
                  "GUEST_MEM_MB=1024; GUEST_CPUS=2; STICK_SIZE_MB=2560; FAST_SIZE_MB=2048; "
                  f"KERNEL_FLAVOUR=lab; KERNEL_SLOWDOWN=1; KBUILD={kbuild}; IMAGE=/x/rootfs.ext4; layout_key")
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                           cwd=root / "lab", env=dict(os.environ, MEMCG_LAB_CACHE=str(tmp_path / "cache")))
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    before = {n: key(n) for n in ("dirty-neighbour", "dirty-neighbour-ext4", "proactive")}
    for base in ("contend.env", "dirtier.env", "machine.env"):
        with open(root / "scenarios" / "base" / base, "a") as f:
            f.write("# edited\n")
        after = {n: key(n) for n in before}
        assert all(after[n] != before[n] for n in before), base
        before = after


def test_scenario_files_and_bases_pass_shellcheck():
    if shutil.which("shellcheck") is None:
        pytest.skip("no shellcheck")
    scenario_dir = os.path.join(ROOT, "scenarios")
    files = [f"{n}.scenario" for n in scenarios()]
    files += [f"base/{b}" for b in sorted(os.listdir(os.path.join(scenario_dir, "base")))]
    # From scenarios/: the files' `# shellcheck source=` paths are
    # relative to it, as $SCENARIO_DIR is.
    p = subprocess.run(["shellcheck", "-x", "-s", "bash"] + files, cwd=scenario_dir,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write-golden"]:
        sys.exit("usage: test_scenario_files.py --write-golden [ROOT]")
    source = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else ROOT
    with open(GOLDEN, "w") as f:
        json.dump(resolve_all(source), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{GOLDEN}: {len(scenarios(source))} scenarios resolved from {source}")


def test_a_runs_scenario_text_holds_every_file_the_scenario_sources(tmp_path):
    """scenario.txt (run-scenario.sh's record_scenario_text): the values a
    run resolved come from its scenario and the files that one sources."""
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); NAME=dirty-neighbour-ext4; "
              f"RUN={tmp_path}; record_scenario_text")
    subprocess.run(["bash", "-c", script], check=True, timeout=300, cwd=os.path.join(ROOT, "lab"))
    text = (tmp_path / "scenario.txt").read_text()
    heads = re.findall(r"^# ==> scenarios/(\S+) <==$", text, re.M)
    assert heads == ["dirty-neighbour-ext4.scenario", "dirty-neighbour.scenario",
                     "base/contend.env", "base/dirtier.env", "base/machine.env"]
    with open(os.path.join(ROOT, "scenarios", "base", "machine.env")) as f:
        assert f.read() in text
