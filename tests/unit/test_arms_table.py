"""The arms table, scenarios/arms.tsv, is the one definition of the arms:
its two readers (scenarios/lib/arms.sh for bash on the host and in the
guest, analysis/memcg_lab/arms_table.py) agree on it and refuse the same
malformed tables; an arm's old name is read as the arm by the analysis
and refused, naming the new one, by the runner and the report; the
guest writes what the table says; and no source file outside the table
defines the arms again (a list or case of arm names), which
test_no_source_file_defines_the_arms_again fails on, naming file and
line."""
import ast
import os
import re
import shutil
import subprocess

import pytest

from memcg_lab import arms_table, collect, load, report, stats

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARMS_SH = os.path.join(ROOT, "scenarios", "lib", "arms.sh")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "runs")
OLD_NAME_RUN = "smoke/20261203T232633Z-vanilla"   # a real run from before the rename


def bash(script, cwd=ROOT, env=None):
    return subprocess.run(["bash", "-c", "set -euo pipefail; " + script], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env={**os.environ, **(env or {})})


def bash_table(arms_sh=ARMS_SH):
    """What the bash reader loaded, as {array: {key: value}}."""
    p = bash(f". '{arms_sh}'; "
             "for a in \"${ARM_NAMES[@]}\"; do printf 'names\\t%s\\t-\\n' \"$a\"; done; "
             "for a in \"${!ARM_GUEST_WRITE[@]}\"; do "
             "printf 'write\\t%s\\t%s\\n' \"$a\" \"${ARM_GUEST_WRITE[$a]}\"; "
             "printf 'needs\\t%s\\t%s\\n' \"$a\" \"${ARM_KERNEL_NEEDS[$a]}\"; "
             "printf 'description\\t%s\\t%s\\n' \"$a\" \"${ARM_DESCRIPTION[$a]}\"; done; "
             "for o in \"${!ARM_RENAMED[@]}\"; do printf 'renamed\\t%s\\t%s\\n' \"$o\" \"${ARM_RENAMED[$o]}\"; done")
    assert p.returncode == 0, p.stderr
    got = {"names": [], "write": {}, "needs": {}, "description": {}, "renamed": {}}
    for line in p.stdout.splitlines():
        kind, key, value = line.split("\t")
        if kind == "names":
            got["names"].append(key)
        else:
            got[kind][key] = value
    return got


def test_bash_and_python_read_the_same_table():
    got = bash_table()
    assert got["names"] == arms_table.ORDER
    for arm in arms_table.ARMS:
        assert got["write"][arm.name] == arm.guest_write
        assert got["needs"][arm.name] == (",".join(arm.kernel_needs) or "-")
        assert got["description"][arm.name] == arm.description
    assert got["renamed"] == arms_table.RENAMED


def test_every_field_of_the_table_is_well_formed():
    assert arms_table.DEFAULT == arms_table.ORDER[0]
    colours = [a.colour for a in arms_table.ARMS]
    assert len(set(colours)) == len(colours)
    for arm in arms_table.ARMS:
        assert re.fullmatch(r"[A-Za-z0-9_]+", arm.name)
        assert arm.guest_write == "-" or re.fullmatch(r"/(proc|sys)/\S+=\S+", arm.guest_write), arm
        for need in arm.kernel_needs:
            assert re.fullmatch(r"CONFIG_[A-Z0-9_]+=y|symbol:[A-Za-z0-9_]+", need), arm
        assert re.fullmatch(r"#[0-9a-f]{6}", arm.colour), arm
        assert arm.description and "\t" not in arm.description
    # The arm that needs nothing of the kernel writes nothing, so a run
    # of it on any kernel measures the kernel as it boots.
    assert arms_table.ARMS[0].guest_write == "-" and arms_table.ARMS[0].kernel_needs == []


def test_vanilla_is_the_old_name_of_default():
    assert arms_table.RENAMED["vanilla"] == "default"
    assert arms_table.canonical("vanilla") == "default"
    assert arms_table.canonical("keep") == "keep"
    assert arms_table.canonical("someone-elses") == "someone-elses"


MALFORMED = {
    "a field short": "default\t-\t-\t#000000\tno\t-\n",
    "an arm twice": "keep\t-\t-\t#000000\tno\t-\tx\nkeep\t-\t-\t#111111\tno\t-\ty\n",
    "an old name that is an arm": "keep\t-\t-\t#000000\tno\t-\tx\nmglru\t-\t-\t#111111\tno\tkeep\ty\n",
}


@pytest.mark.parametrize("what", MALFORMED)
def test_both_readers_refuse_a_malformed_table(tmp_path, what):
    header = "\t".join(arms_table.COLUMNS) + "\n"
    (tmp_path / "lib").mkdir()
    shutil.copy(ARMS_SH, tmp_path / "lib" / "arms.sh")
    (tmp_path / "arms.tsv").write_text("# a comment\n" + header + MALFORMED[what])
    with pytest.raises(arms_table.ArmsTableError, match=r"arms\.tsv:\d+: "):
        arms_table.read_table(str(tmp_path / "arms.tsv"))
    p = bash(f". '{tmp_path}/lib/arms.sh'; echo loaded")
    assert p.returncode == 1 and "loaded" not in p.stdout
    assert re.search(r"arms\.tsv:\d+: ", p.stderr), p.stderr


# --- old names: read as the arm, refused where an arm is asked for ---

def copy_run(dest, src, name=None):
    path = dest / (name or src)
    shutil.copytree(os.path.join(FIXTURES, src), path)
    return path


def test_a_run_under_the_old_name_vanilla_is_read_as_default(tmp_path):
    # The real run, from before the rename: folder, arm.txt,
    # provenance.txt and params-resolved.env all say vanilla.
    r = load.Run(os.path.join(FIXTURES, OLD_NAME_RUN))
    assert r.provenance["arm"] == "vanilla" and r.params["ARM"] == "vanilla"
    assert (r.arm, r.folder_arm) == ("default", "default")
    # With a run of today's name, one cell "default", neither excluded
    # as mislabelled nor as a mixed arm.
    copy_run(tmp_path, OLD_NAME_RUN)
    new = copy_run(tmp_path, OLD_NAME_RUN, OLD_NAME_RUN.replace("-vanilla", "-default"))
    for name, old, now in (("provenance.txt", "arm=vanilla", "arm=default"),
                           ("params-resolved.env", "ARM=vanilla", "ARM=default")):
        (new / name).write_text((new / name).read_text().replace(old, now))
    d = collect.Dataset(str(tmp_path))
    assert list(d.runs["arm"]) == ["default", "default"]
    assert list(d.runs["valid"]) == [True, True], list(d.runs["reason"])
    assert d.arms("smoke") == ["default"]


def test_an_old_run_relabelled_in_part_is_not_mislabelled(tmp_path):
    # A folder renamed by hand, its provenance.txt left as it was.
    copy_run(tmp_path, OLD_NAME_RUN, OLD_NAME_RUN.replace("-vanilla", "-default"))
    d = collect.Dataset(str(tmp_path))
    assert list(d.runs["valid"]) == [True], list(d.runs["reason"])


def test_the_report_refuses_the_old_name_as_its_baseline(tmp_path):
    copy_run(tmp_path, OLD_NAME_RUN)
    for baseline, told in (("vanilla", "BASELINE=default"),
                           ("pristine-6.1:vanilla", "BASELINE=pristine-6.1:default")):
        with pytest.raises(report.ReportError, match="baseline arm 'vanilla' is now called "
                                                     f"'default' \\({told}\\)"):
            report.build(str(tmp_path), baseline, stamp="x")
    assert not (tmp_path / "report").exists()


def test_the_matrix_counts_runs_and_ledger_lines_of_the_old_name(tmp_path):
    matrix = os.path.join(ROOT, "lab", "matrix.sh")
    env = dict(os.environ, MEMCG_LAB_RESULTS=str(tmp_path))
    (tmp_path / "matrix-ledger.csv").write_text(
        "scenario,arm,rep,result,run_folder,finished_utc,reason\n"
        "proactive,vanilla,1,ok,/x,2026-12-03T00:00:00Z,\n")
    p = subprocess.run([matrix, "one", "proactive", "default", "1"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 0 and "done before" in p.stderr, p.stderr
    # An ok run of the old name on the debug kernel keeps a lab-kernel
    # matrix of default out of its results root, as one of today's would.
    run = tmp_path / "proactive" / "20261203T000000Z-vanilla"
    run.mkdir(parents=True)
    (run / "status.txt").write_text("result=ok\nkernel_flavour=debug\n")
    p = subprocess.run([matrix, "jobs", "proactive", "default", "1"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 1 and "20261203T000000Z-vanilla (debug)" in p.stderr, p.stderr


# --- the guest: what apply_arm writes ---

def apply_arm(tmp_path, arm, table=None):
    """The runner's apply_arm on the host, with lab_dir a copy of
    scenarios/lib/arms.sh beside the real table or the one given."""
    lab = tmp_path / "lab"
    (lab / "lib").mkdir(parents=True)
    shutil.copy(ARMS_SH, lab / "lib" / "arms.sh")
    if table is None:
        shutil.copy(os.path.join(ROOT, "scenarios", "arms.tsv"), lab / "arms.tsv")
    else:
        (lab / "arms.tsv").write_text(table)
    out = tmp_path / "out"
    out.mkdir()
    return bash("source scenarios/lib/guest-run.sh "
                f"smoke {arm}; lab_dir={lab} out_dir={out}; apply_arm; cat {out}/arm.txt")


def test_the_guest_writes_the_tables_value_into_the_tables_file(tmp_path):
    knob = tmp_path / "knob"
    knob.write_text("before\n")
    header = "\t".join(arms_table.COLUMNS) + "\n"
    table = header + (f"none\t-\t-\t#000000\tno\t-\tnothing\n"
                      f"write\t{knob}=after\t-\t#111111\tno\told\tx\n"
                      f"absent\t{tmp_path}/nothing-here=y\tCONFIG_X=y\t#222222\tno\t-\ty\n")
    p = apply_arm(tmp_path / "a", "write", table)
    assert p.returncode == 0, p.stderr
    assert knob.read_text() == "after\n" and "arm=write" in p.stdout
    p = apply_arm(tmp_path / "b", "none", table)
    assert p.returncode == 0 and knob.read_text() == "after\n"
    p = apply_arm(tmp_path / "c", "absent", table)
    assert p.returncode == 1
    assert f"arm absent writes {tmp_path}/nothing-here, which this kernel does not have " \
           "(it needs CONFIG_X=y)" in p.stdout
    p = apply_arm(tmp_path / "d", "old", table)
    assert p.returncode == 1 and "arm 'old' is now called 'write'" in p.stdout


def test_the_guest_refuses_vanilla_and_runs_default_writing_nothing(tmp_path):
    p = apply_arm(tmp_path / "a", "vanilla")
    assert p.returncode == 1 and "arm 'vanilla' is now called 'default'" in p.stdout
    p = apply_arm(tmp_path / "b", "default")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("arm=default\n")


# --- no second definition ---

# Lists of arms that are a choice, not a definition: each is checked
# against the table below.  (file, the variable its line assigns)
CHOICES = {("lab/matrix.sh", "VERDICT_ARMS"), ("scenarios/shapes/stress.sh", "stress_policies"),
           ("analysis/memcg_lab/stats.py", "LAB_BASELINES")}
ARM_WORDS = set(arms_table.ORDER) | set(arms_table.RENAMED)
WORD = r"[A-Za-z0-9_.-]+"


def is_definition(items, least=2):
    """A list of names defines arms when every item is an arm's name (or
    an old one) and there are at least `least` of them."""
    items = [i for i in items if i]
    return len(items) >= least and all(i in ARM_WORDS for i in items)


def strip_shell_comment(line):
    """The line without its comment: a # that starts a word outside
    quotes ($# and ${#x} do not)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t;"):
            return line[:i]
    return line


def shell_lists(line):
    """The lists a line of shell (or Makefile) holds: words joined by | or
    , (case patterns, a=b|c), the words of a quoted string, of an array
    literal, and of a for loop."""
    lists = [re.split(r"\s*[|,]\s*", m.group(0))
             for m in re.finditer(rf"{WORD}(?:[ \t]*[|,][ \t]*{WORD})+", line)]
    for pattern in (r'"([^"]*)"', r"'([^']*)'", r"=\(([^)]*)\)", r"\bfor\s+\w+\s+in\s+([^;]*)"):
        lists += [m.group(1).split() for m in re.finditer(pattern, line)]
    return lists


def case_blocks(lines):
    """(first line number, patterns) of each case ... esac: the patterns
    of one case statement are one list, however many lines they take."""
    stack = []
    for n, line in enumerate(lines, start=1):
        if re.search(r"\bcase\b.*\bin\b", line):
            stack.append((n, []))
        elif re.match(r"\s*esac\b", line) and stack:
            yield stack.pop()
        elif stack:
            m = re.match(rf"\s*\(?\s*({WORD}(?:\s*\|\s*{WORD})*)\s*\)", line)
            if m:
                stack[-1][1].extend(re.split(r"\s*\|\s*", m.group(1)))


def shell_definitions(text):
    lines = [strip_shell_comment(line) for line in text.splitlines()]
    found = [(n, line) for n, line in enumerate(lines, start=1)
             if any(is_definition(items) for items in shell_lists(line))]
    found += [(n, lines[n - 1]) for n, patterns in case_blocks(lines)
              if is_definition(patterns)]
    return found


def python_definitions(text):
    """Collections of arm names (list, tuple, set, dict keys), even of
    one, and strings of two or more ("a b".split())."""
    found = []
    for node in ast.walk(ast.parse(text)):
        items = None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = node.keys
        if items is not None:
            names = [i.value if isinstance(i, ast.Constant) and isinstance(i.value, str) else None
                     for i in items]
            if None not in names and is_definition(names, least=1):
                found.append((node.lineno, ast.get_source_segment(text, node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if is_definition(re.split(r"[\s|,]+", node.value.strip())):
                found.append((node.lineno, node.value))
    return found


def source_files():
    """The lab's code: shell, Python, the Makefile, scenario files and
    their bases (.env), scripts without an ending (the guest agent), less
    tests/, whose data names arms freely, and the table itself."""
    p = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for rel in p.stdout.splitlines():
        path = os.path.join(ROOT, rel)
        if rel.startswith("tests/") or not os.path.isfile(path):
            continue
        if rel.endswith(".py"):
            yield rel, "python"
        elif rel.endswith((".sh", ".scenario", ".env")) or os.path.basename(rel) == "Makefile":
            yield rel, "shell"
        elif "." not in os.path.basename(rel):
            with open(path, "rb") as f:
                first = f.readline()
            if first.startswith(b"#!") and b"python" in first:
                yield rel, "python"
            elif first.startswith(b"#!") and b"sh" in first:
                yield rel, "shell"


def definitions_outside_the_table():
    found = []
    for rel, kind in source_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        hits = python_definitions(text) if kind == "python" else shell_definitions(text)
        for n, what in hits:
            line = text.splitlines()[n - 1]
            if any(rel == path and re.match(rf"\s*{var}\s*=", line) for path, var in CHOICES):
                continue
            found.append(f"{rel}:{n}: {what.strip()}")
    return found


def test_no_source_file_defines_the_arms_again():
    found = definitions_outside_the_table()
    assert not found, ("arms defined outside scenarios/arms.tsv (read it through "
                       "scenarios/lib/arms.sh or memcg_lab.arms_table instead):\n"
                       + "\n".join(found))


def test_the_scan_finds_what_the_arms_were_defined_as_before_the_table():
    # The definitions this table replaced, as they stood.
    shell = """ARM ?= vanilla
\t@echo "  make scenario NAME=<scenario> [ARM=vanilla|mglru|keep|activate|immediate] [SET=x]"
ARMS="vanilla mglru keep activate immediate"
\tcase $ARM in
\tvanilla) ;;
\tmglru) echo y >/sys/kernel/mm/lru_gen/enabled ;;
\t*) die "arm $ARM is not known to this runner" ;;
\tesac
\tcase $ARM in
\tkeep | activate | immediate) grep -q x "$map" ;;  # the series
\tesac
"""
    assert sorted(n for n, _ in shell_definitions(shell)) == [2, 3, 4, 9, 10]
    python = """ARM_ORDER = ["vanilla", "mglru", "keep", "activate", "immediate"]
ARM_COLOURS = {"vanilla": "#4d4d4d", "mglru": "#1f77b4"}
PRECONDITION_IS_OUTCOME = {"immediate"}
ARMS = "default keep".split()
"""
    assert [n for n, _ in python_definitions(python)] == [1, 2, 3, 4]
    # Not definitions: one name, prose, test names that are also arm
    # names among others, comments.
    fine = """\tfor t in park activate immediate toggle rmdir mglru large; do
\tdie "arm $ARM needs the series' keep and activate policies"
\techo activate >"$WRITEBACK_POLICY"  # keep | activate
ARM=${2:-default}
"""
    assert shell_definitions(fine) == []
    assert python_definitions('x = ("yes", "no")\nbaseline = "default"\n'
                              '"""keep and activate"""\n') == []


def test_the_choices_of_arms_are_arms_of_the_table():
    with open(os.path.join(ROOT, "lab", "matrix.sh")) as f:
        verdict = re.search(r'^VERDICT_ARMS="([^"]*)"', f.read(), re.M).group(1).split()
    assert verdict == ["activate", "keep", "immediate", "mglru", "dirtylimit"]
    assert set(verdict) <= set(arms_table.ORDER)
    # The stress scenario cycles through values of the series' policy
    # sysctl: each one an arm of the table writes there.
    with open(os.path.join(ROOT, "scenarios", "shapes", "stress.sh")) as f:
        policies = re.search(r"^stress_policies=\(([^)]*)\)", f.read(), re.M).group(1).split()
    written = {a.guest_write for a in arms_table.ARMS}
    assert all(f"/proc/sys/vm/reclaim_writeback_policy={p}" in written for p in policies)
    # The 2011 comparison's arms (stats.beside_2011): arms of the table.
    assert set(stats.LAB_BASELINES) | {stats.LAB_TREATMENT} <= set(arms_table.ORDER)


def test_matrix_refuses_a_verdict_arm_the_table_does_not_have(tmp_path):
    script = tmp_path / "matrix.sh"
    with open(os.path.join(ROOT, "lab", "matrix.sh")) as f:
        text = f.read().replace('VERDICT_ARMS="activate', 'VERDICT_ARMS="vanilla activate')
    script.write_text(text.replace('. "$(dirname "$0")/lib.sh"', f'. "{ROOT}/lab/lib.sh"'))
    p = subprocess.run(["bash", str(script), "defaults"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1
    assert "VERDICT_ARMS in lab/matrix.sh: arm 'vanilla' is now called 'default'" in p.stderr
