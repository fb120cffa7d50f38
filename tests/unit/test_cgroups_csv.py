"""cgroups.csv, the run folder's own word on who is who: the guest
writes a row per cgroup it makes with its role (scenarios/lib/cgroups.sh,
record_member, called by run_in_scope), the analysis reads it
(analysis/memcg_lab/run.py, read_cgroups and run_cgroups) and falls back
to the names the guest has always used for runs from before it.  The
role words are defined once on each side, and the two lists must agree;
a run gives the same summary with the file as without it."""
import os
import re
import shutil
import subprocess

import pytest

from memcg_lab import load, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUEST_RUN = os.path.join(ROOT, "scenarios", "lib", "guest-run.sh")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "runs")


def bash(script):
    return subprocess.run(["bash", "-c", "set -euo pipefail; " + script], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


# The runner sourced, with the commands that would make cgroups stubbed:
# each call is logged to $out_dir/made, and the member "appears" at once.
STUBBED = (f"source '{GUEST_RUN}' smoke default; "
           "systemd-run() { echo \"systemd-run $*\" >>\"$out_dir/made\"; }; "
           "cgcreate() { echo \"cgcreate $*\" >>\"$out_dir/made\"; }; "
           "cgset() { :; }; cgexec() { :; }; wait_member_exists() { :; }; ")


def test_the_guest_and_the_analysis_know_the_same_roles():
    p = bash(f"source '{GUEST_RUN}' smoke default; cgroup_roles")
    assert p.returncode == 0, p.stderr
    assert tuple(p.stdout.split()) == run.ROLES


def test_every_member_a_shape_makes_has_a_role():
    # The members are named where they are started: run_in_scope NAME,
    # start_dirtier NAME, start_pinned_dirtier NAME; "dirtier-$i" is a
    # dirtier (the role is the name less its index).
    made = re.compile(r"\b(?:run_in_scope|start_dirtier|start_pinned_dirtier) \"?([a-z][a-z-]*)"
                      r"(?:-\$\{?[A-Za-z_]+\}?)?\"?[ \n]")
    names = set()
    for folder in ("lib", "shapes"):
        for name in os.listdir(os.path.join(ROOT, "scenarios", folder)):
            if name.endswith(".sh"):
                with open(os.path.join(ROOT, "scenarios", folder, name)) as f:
                    names |= set(made.findall(f.read()))
    assert {"dirtier", "neighbour", "copier", "alloc", "churn"} <= names
    assert names <= set(run.ROLES) - {"parent"}, names


def test_the_guest_writes_a_row_per_member_on_cgroup_v2(tmp_path):
    p = bash(STUBBED + f"out_dir={tmp_path}; cgroup_mode=v2; slice=lab.slice; "
             "run_in_scope dirtier-1 -- true; run_in_scope dirtier-2 MemoryMax=100M -- true; "
             "run_in_scope neighbour -- true; run_in_scope dirtier-1 -- true; wait")
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "cgroups.csv").read_text() == (
        "role,cgroup\nparent,lab.slice\ndirtier,lab.slice/dirtier-1.scope\n"
        "dirtier,lab.slice/dirtier-2.scope\nneighbour,lab.slice/neighbour.scope\n")
    # and what it wrote reads back as the analysis wants it
    assert run.run_cgroups(tmp_path, set(), "v2") == run.Cgroups(
        "lab.slice", ["lab.slice/dirtier-1.scope", "lab.slice/dirtier-2.scope"],
        "lab.slice/neighbour.scope")


def test_the_guest_writes_a_row_per_member_on_cgroup_v1(tmp_path):
    p = bash(STUBBED + f"out_dir={tmp_path}; cgroup_mode=v1; slice=memcg-lab; "
             "run_in_scope copier-1 -- true; run_in_scope alloc-1 -- true; wait")
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "cgroups.csv").read_text() == (
        "role,cgroup\nparent,memcg-lab\ncopier,memcg-lab/copier-1\nalloc,memcg-lab/alloc-1\n")
    assert run.run_cgroups(tmp_path, set(), "v1") == run.Cgroups("memcg-lab", [], None)


@pytest.mark.parametrize("name", ["writer", "parent", "dirtier-x"])
def test_a_member_without_a_role_stops_the_run_before_it_starts(tmp_path, name):
    p = bash(STUBBED + f"out_dir={tmp_path}; cgroup_mode=v2; slice=lab.slice; "
             f"run_in_scope {name} -- true")
    assert p.returncode == 1
    assert f"error: member {name} has no role: its name less any -<n> must be one of: " \
           "parent dirtier neighbour copier alloc churn" in p.stdout, p.stdout
    assert not (tmp_path / "made").exists() and not (tmp_path / "cgroups.csv").exists()


def write_csv(path, text):
    (path / "cgroups.csv").write_text(text)
    return str(path / "cgroups.csv")


def test_the_reader_gives_the_rows_in_file_order(tmp_path):
    write_csv(tmp_path, "role,cgroup\nparent,lab.slice\ndirtier,lab.slice/dirtier-10.scope\n"
                        "dirtier,lab.slice/dirtier-2.scope\nalloc,lab.slice/alloc-1.scope\n")
    assert run.read_cgroups(str(tmp_path / "cgroups.csv")) == [
        ("parent", "lab.slice"), ("dirtier", "lab.slice/dirtier-10.scope"),
        ("dirtier", "lab.slice/dirtier-2.scope"), ("alloc", "lab.slice/alloc-1.scope")]
    got = run.run_cgroups(tmp_path, {"lab.slice/dirtier.scope"}, "v2")
    assert got.parent == "lab.slice" and got.neighbour is None
    assert got.dirtiers == ["lab.slice/dirtier-10.scope", "lab.slice/dirtier-2.scope"]
    assert got.dirtier is None          # several: no one dirtier


def test_without_the_file_the_old_names_are_used(tmp_path):
    assert run.read_cgroups(str(tmp_path / "cgroups.csv")) is None
    v2 = run.run_cgroups(tmp_path, {"lab.slice", "lab.slice/dirtier.scope"}, "v2")
    assert v2 == run.Cgroups(run.SLICE, [run.DIRTIER], run.NEIGHBOUR)
    assert v2.dirtier == run.DIRTIER
    assert run.run_cgroups(tmp_path, {"memcg-lab"}, "v1") == run.Cgroups(
        "memcg-lab", ["memcg-lab/dirtier"], "memcg-lab/neighbour")
    many = {f"lab.slice/dirtier-{n}.scope" for n in (10, 2, 1)} | {"lab.slice"}
    assert run.run_cgroups(tmp_path, many, "v2").dirtiers == [
        f"lab.slice/dirtier-{n}.scope" for n in (1, 2, 10)]


@pytest.mark.parametrize("text, message", [
    ("role,cgroup\nparent,lab.slice\nwriter,lab.slice/w.scope\n",
     r"cgroups.csv:3: unknown role 'writer' \(known: parent, dirtier, neighbour"),
    ("role\nparent\n", r"cgroups.csv: expected the header role,cgroup, got \['role'\]"),
    ("cgroup,role\nlab.slice,parent\n", r"cgroups.csv: expected the header role,cgroup"),
    ("", r"cgroups.csv: expected the header role,cgroup, got None"),
    ("role,cgroup\nparent\n", r"cgroups.csv:2: expected role,cgroup, got \['parent'\]"),
    ("role,cgroup\nparent,\n", r"cgroups.csv:2: expected role,cgroup"),
    ("role,cgroup\ndirtier,lab.slice/dirtier.scope\n", r"cgroups.csv: 0 parent rows, expected one"),
    ("role,cgroup\nparent,a\nparent,b\n", r"cgroups.csv: 2 parent rows, expected one"),
    ("role,cgroup\nparent,a\nneighbour,a/n1\nneighbour,a/n2\n",
     r"cgroups.csv: 2 neighbour rows, expected one at most"),
])
def test_a_broken_file_is_an_error_naming_it(tmp_path, text, message):
    path = write_csv(tmp_path, text)
    with pytest.raises(run.RunError, match=re.escape(str(tmp_path)) + "/" + message):
        run.run_cgroups(tmp_path, set(), "v2")
    # and the run cannot be summarised, for the same reason
    shutil.copy(os.path.join(FIXTURES, "smoke", "20261203T232633Z-vanilla", "samples.csv"),
                tmp_path)
    shutil.copy(os.path.join(FIXTURES, "smoke", "20261203T232633Z-vanilla", "phases.csv"),
                tmp_path)
    with pytest.raises(run.RunError, match=re.escape(path)):
        run.summarise(tmp_path)


V2_ROWS = ("role,cgroup\nparent,lab.slice\ndirtier,lab.slice/dirtier.scope\n"
           "neighbour,lab.slice/neighbour.scope\n")


@pytest.mark.parametrize("fixture, rows", [
    ("dirty-neighbour/20261203T231532Z-default", V2_ROWS),
    ("dirty-neighbour/20261203T232812Z-mglru", V2_ROWS),
    ("smoke/20261203T232633Z-vanilla", "role,cgroup\nparent,lab.slice\n"
                                       "dirtier,lab.slice/dirtier.scope\n"),
    # neither dirtier nor neighbour: the precondition is judged on none
    ("writeback-cp/20261204T010529Z-default",
     "role,cgroup\nparent,lab.slice\ncopier,lab.slice/copier-1.scope\n"
     "alloc,lab.slice/alloc-1.scope\ncopier,lab.slice/copier-2.scope\n"
     "alloc,lab.slice/alloc-2.scope\n"),
])
def test_a_run_gives_the_same_summary_with_the_file(tmp_path, fixture, rows):
    path = tmp_path / fixture
    shutil.copytree(os.path.join(FIXTURES, fixture), path)
    before = run.summarise(path)
    write_csv(path, rows)
    assert run.summarise(path) == before
    assert run.format_summary(run.summarise(path)) == run.format_summary(before)


def test_the_file_names_cgroups_the_old_names_do_not_know(tmp_path):
    # A parent, dirtier and neighbour of other names: found by their roles.
    samples = ["time_s,cgroup,key,value"]
    for t, wb, scan in [(1, 80, 0), (2, 90, 50), (3, 85, 120)]:
        samples += [f"{t},exp.slice/w.scope,memory.stat.inactive_file,90",
                    f"{t},exp.slice/w.scope,memory.stat.active_file,10",
                    f"{t},exp.slice/w.scope,memory.stat.file_writeback,{wb}",
                    f"{t},exp.slice/w.scope,memory.stat.pgscan,{scan}",
                    f"{t},exp.slice/r.scope,memory.pressure.some.total,{t * 1000}",
                    f"{t},exp.slice,memory.stat.pgscan,{2 * scan}",
                    f"{t},exp.slice,memory.stat.pgsteal,{scan}"]
    (tmp_path / "samples.csv").write_text("\n".join(samples) + "\n")
    (tmp_path / "phases.csv").write_text("neighbour,1,3\n")
    (tmp_path / "params-resolved.env").write_text("PRECONDITION_WRITEBACK_SHARE=0.8\n")
    before = run.summarise(tmp_path)
    assert before["counters"] == {} and before["precondition"]["samples"] == 0
    write_csv(tmp_path, "role,cgroup\nparent,exp.slice\ndirtier,exp.slice/w.scope\n"
                        "neighbour,exp.slice/r.scope\n")
    s = run.summarise(tmp_path)
    assert s["counters"] == {"exp.slice/r.scope:memory.pressure.some.total": 2000,
                             "exp.slice/w.scope:memory.stat.pgscan": 120,
                             "exp.slice:memory.stat.pgscan": 240,
                             "exp.slice:memory.stat.pgsteal": 120}
    assert s["precondition"]["met"] is True and s["precondition"]["samples"] == 3
    assert s["parent_reclaim_efficiency"] == 0.5
    r = load.Run(str(tmp_path))
    assert r.cgroups() == run.Cgroups("exp.slice", ["exp.slice/w.scope"], "exp.slice/r.scope")
    assert list(r.series(r.cgroups().dirtier, "memory.stat.pgscan")) == [0, 50, 120]


def test_member_rchar_sums_what_the_member_s_processes_have_read(tmp_path):
    # Two live readers in a member's cgroup.procs, and a pid that has
    # exited (it counts 0, it is not an error).
    data = tmp_path / "data"
    data.write_bytes(b"x" * (3 << 20))
    readers = [subprocess.Popen(["python3", "-c", f"open('{data}', 'rb').read({n << 20}); "
                                 "import sys; sys.stdout.write('r\\n'); sys.stdout.flush(); "
                                 "sys.stdin.read()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for n in (1, 2)]
    try:
        for r in readers:
            assert r.stdout.readline() == "r\n"
        scope = tmp_path / "lab.slice" / "neighbour.scope"
        scope.mkdir(parents=True)
        gone = 2 ** 22 + 1     # above the largest pid_max: no such process
        (scope / "cgroup.procs").write_text("".join(f"{r.pid}\n" for r in readers) + f"{gone}\n")
        p = bash(f"source '{GUEST_RUN}' smoke default; cgroot={tmp_path}; cgroup_mode=v2; "
                 "slice=lab.slice; member_rchar neighbour")
        assert p.returncode == 0, p.stderr
        # 3 MiB read, plus what the interpreter read starting up.
        assert (3 << 20) <= int(p.stdout) < (3 << 20) + (8 << 20)
    finally:
        for r in readers:
            r.kill()
            r.wait()
