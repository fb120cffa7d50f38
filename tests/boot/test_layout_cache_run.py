"""Two dirty-neighbour runs of one layout recipe: the first lays its
files out and has the host keep the disks, the second boots on a copy and
lays out nothing; both measure."""
from run_folder import RunFolder

FIRST = RunFolder("LAB_LAYOUT_FIRST_RUN")
SECOND = RunFolder("LAB_LAYOUT_SECOND_RUN")


def layout(run):
    return dict(line.split("=", 1) for line in run.read("provenance.txt").splitlines()
                if "=" in line)["layout"].split()


@FIRST.skip
def test_both_runs_measured():
    for run in (FIRST, SECOND):
        assert run.status()["result"] == "ok"
        assert "neighbour," in run.read("phases.csv")


@FIRST.skip
def test_the_first_run_laid_out_and_the_host_kept_its_disks():
    mode, key = layout(FIRST)
    assert mode == "save"
    console = FIRST.read("console.log")
    assert "laying out dirty file 1 of 1" in console
    assert "disks: save layout" in console
    assert FIRST.read("layout.state") == "saved\n"
    assert layout(SECOND) == ["cached", key]


@FIRST.skip
def test_the_second_run_found_its_files_and_laid_out_nothing():
    console = SECOND.read("console.log")
    assert "nothing to lay out" in console
    assert "laying out" not in console
