"""lab/compare-objects.sh (check-series --n-vs-vanilla's comparison) on
objects gcc builds here: identical code is "same" even where a bug
table's line numbers differ, changed code or an object only one tree
has is a difference, and only ALLOWED differences pass."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "lab/compare-objects.sh")

# A __bug_table entry like the kernel's WARN() and a local symbol named
# after the line like an initcall's: the line number is in a section and
# in a name, the code is the same.
WITH_BUG_TABLE = """
static int __attribute__((used)) initcall_{line}_f = 1;

int f(int x)
{{
	asm volatile(".pushsection __bug_table,\\"aw\\"\\n.long {line}\\n.popsection");
	return x * {factor};
}}
"""


def build(tree, rel, line=10, factor=3):
    src = tree / (rel[:-2] + ".c")
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(WITH_BUG_TABLE.format(line=line, factor=factor))
    subprocess.run(["gcc", "-O2", "-c", str(src), "-o", str(tree / rel)], check=True)


def compare(tmp_path, *allowed):
    report = tmp_path / "report.txt"
    args = [COMPARE, str(tmp_path / "vanilla"), str(tmp_path / "n"), str(report), "mm/"]
    if allowed:
        args += ["--"] + list(allowed)
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    lines = report.read_text().splitlines() if report.exists() else []
    return p, dict(reversed(line.split(" ", 1)) for line in lines)


def test_same_code_with_shifted_line_numbers_is_the_same(tmp_path):
    build(tmp_path / "vanilla", "mm/a.o", line=10)
    build(tmp_path / "n", "mm/a.o", line=99)
    p, report = compare(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert report == {"mm/a.o": "same"}
    assert "1 objects identical" in p.stdout


def test_changed_code_fails_unless_allowed(tmp_path):
    for tree in ("vanilla", "n"):
        build(tmp_path / tree, "mm/a.o")
    build(tmp_path / "vanilla", "mm/vmscan.o", factor=3)
    build(tmp_path / "n", "mm/vmscan.o", factor=5)
    p, report = compare(tmp_path)
    assert p.returncode == 1
    assert report == {"mm/a.o": "same", "mm/vmscan.o": "differs"}
    assert "differ: mm/vmscan.o" in p.stdout
    p, _ = compare(tmp_path, "mm/vmscan.o")
    assert p.returncode == 0, p.stdout
    assert "differ as allowed: mm/vmscan.o" in p.stdout


def test_an_object_only_one_tree_has_differs(tmp_path):
    for tree in ("vanilla", "n"):
        build(tmp_path / tree, "mm/a.o")
    build(tmp_path / "n", "mm/extra.o")
    p, report = compare(tmp_path)
    assert p.returncode == 1
    assert report["mm/extra.o"] == "differs"


def test_nothing_to_compare_or_a_missing_folder_fails(tmp_path):
    (tmp_path / "vanilla").mkdir()
    (tmp_path / "n").mkdir()
    p, _ = compare(tmp_path)
    assert p.returncode == 1
    p = subprocess.run([COMPARE, str(tmp_path / "nope"), str(tmp_path / "n"),
                        str(tmp_path / "r.txt"), "mm/"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "no such build folder" in p.stderr
