"""The kernel axis in the analysis: folder names with and without a
kernel label, each run's kernel, cells (kernel, arm) that keep runs of two
kernels apart instead of calling them a mixed arm, and make report's
side-by-side tables.  Runs of a second kernel are copies of the real
fixture run relabelled in tmp_path (folder name, provenance.txt's
kernel_label, another build id): each test says what it changed."""
import os
import shutil

import pandas as pd
import pytest

from memcg_lab import collect, load, report, validate
from test_analysis_report import scale_neighbour

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")
DEFAULT_RUN = "dirty-neighbour/20261203T231532Z-default"
PRISTINE = "dirty-neighbour/20261203T231532Z-pristine-6.1-default"


@pytest.mark.parametrize("name,kernel,arm,n", [
    ("20261203T231532Z-default", None, "default", None),
    ("20261203T231532Z-default.2", None, "default", "2"),
    ("20261203T231532Z-lab-immediate", "lab", "immediate", None),
    ("20261203T231532Z-pristine-6.1-default", "pristine-6.1", "default", None),
    ("20261203T231532Z-pristine-6.1-default.3", "pristine-6.1", "default", "3"),
    ("20261203T231532Z-my_tree.v2-mglru", "my_tree.v2", "mglru", None)])
def test_folder_names_with_and_without_a_kernel_label(name, kernel, arm, n):
    m = load.RUN_NAME.match(name)
    assert (m.group("kernel"), m.group("arm"), m.group("n")) == (kernel, arm, n)


def relabel(tmp_path, dest, kernel, build_id, factor=None):
    """A copy of the real default run as a run of another kernel."""
    path = tmp_path / dest
    shutil.copytree(os.path.join(FIXTURES, DEFAULT_RUN), path)
    with open(path / "provenance.txt", "a") as f:
        f.write(f"kernel_label={kernel}\n")
    (path / "kernel-build-id.txt").write_text(build_id + "\n")
    if factor is not None:
        scale_neighbour(path, factor)
    return path


def two_kernels(tmp_path):
    """Two old-style lab runs and two pristine-6.1 runs of default."""
    for n, factor in (("", None), (".2", 1.1)):
        shutil.copytree(os.path.join(FIXTURES, DEFAULT_RUN), tmp_path / (DEFAULT_RUN + n))
        if factor:
            scale_neighbour(tmp_path / (DEFAULT_RUN + n), factor)
        relabel(tmp_path, PRISTINE + n, "pristine-6.1", "beef", factor=1.3 if n else 1.2)


def test_a_run_without_a_label_is_the_lab_kernel_or_its_flavour(tmp_path):
    assert load.Run(os.path.join(FIXTURES, DEFAULT_RUN)).kernel == "lab"
    p = tmp_path / "d" / "20261203T231532Z-keep"
    p.mkdir(parents=True)
    (p / "provenance.txt").write_text("kernel_flavour=debug\narm=keep\n")
    assert load.Run(p).kernel == "debug"
    q = relabel(tmp_path, PRISTINE, "pristine-6.1", "beef")
    assert load.Run(q).kernel == "pristine-6.1" and load.Run(q).arm == "default"


def test_one_kernel_keeps_arms_as_cells(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, DEFAULT_RUN), tmp_path / DEFAULT_RUN)
    d = collect.Dataset(tmp_path)
    assert d.kernels == ["lab"]
    assert list(d.runs["arm"]) == ["default"] and list(d.runs["kernel"]) == ["lab"]
    assert set(d.metrics["arm"]) == {"default"}


def test_runs_of_two_kernels_are_two_cells_not_a_mixed_arm(tmp_path):
    two_kernels(tmp_path)
    d = collect.Dataset(tmp_path)
    assert d.runs["valid"].all(), d.runs[["run", "reason"]]
    assert d.kernels == ["lab", "pristine-6.1"]
    assert d.arms("dirty-neighbour") == ["lab:default", "pristine-6.1:default"]
    by_run = d.runs.set_index("run")
    assert by_run.loc[PRISTINE + ".2", "arm"] == "pristine-6.1:default"
    assert by_run.loc[PRISTINE + ".2", "kernel"] == "pristine-6.1"
    assert set(d.metrics["arm"]) == {"lab:default", "pristine-6.1:default"}
    # the parameters of the two kernels' runs differ only by the kernel
    assert d.notes["dirty-neighbour"] == []


def test_the_mixed_run_check_applies_within_a_cell(tmp_path):
    two_kernels(tmp_path)
    relabel(tmp_path, PRISTINE + ".3", "pristine-6.1", "deadbeef")
    r = dict(zip(*(collect.Dataset(tmp_path).runs[c] for c in ("run", "reason"))))
    assert r[PRISTINE + ".3"].startswith("mixed arm: kernel build id deadbeef differs")
    assert r[PRISTINE] == r[PRISTINE + ".2"] == r[DEFAULT_RUN] == r[DEFAULT_RUN + ".2"] == ""


def test_folder_and_provenance_kernels_must_agree(tmp_path):
    relabel(tmp_path, PRISTINE, "debian-6.12", "beef")
    r = dict(zip(*(collect.Dataset(tmp_path).runs[c] for c in ("run", "reason"))))
    assert r[PRISTINE] == ("mislabelled: folder says kernel pristine-6.1, provenance.txt says "
                           "kernel_label=debian-6.12")


def test_kernels_order_as_lab_lib_lists_them_then_by_name():
    assert collect.KERNEL_ORDER[:4] == ["lab", "debug", "pristine-6.1", "debian-6.12"]
    cells = ["zz:default", "debian-6.12:default", "lab:immediate", "lab:default",
             "pristine-6.1:default", "aa:keep"]
    assert sorted(cells, key=collect.arm_order) == [
        "lab:default", "lab:immediate", "pristine-6.1:default", "debian-6.12:default",
        "aa:keep", "zz:default"]


def test_a_baseline_arm_means_that_arm_on_the_lab_kernel_when_kernels_are_several():
    cells = ["lab:default", "lab:activate", "pristine-6.1:default"]
    assert report.choose_baseline(cells, "activate") == ("lab:activate", None)
    assert report.choose_baseline(cells, "pristine-6.1:default") == ("pristine-6.1:default", None)
    assert report.choose_baseline(["pristine-6.1:default", "debian-6.12:default"],
                                  "default") == ("pristine-6.1:default", None)
    base, note = report.choose_baseline(["pristine-6.1:default", "debian-6.12:default"], "keep")
    assert base == "pristine-6.1:default" and "baseline arm keep has no valid runs" in note
    # one kernel: as before
    assert report.choose_baseline(["default", "mglru"], "activate")[0] == "default"


def test_make_report_compares_kernels_side_by_side(tmp_path):
    two_kernels(tmp_path)
    out, ds = report.build(str(tmp_path), baseline="pristine-6.1:default", stamp="T")
    with open(os.path.join(out, "dirty-neighbour", "compare.txt")) as f:
        text = f.read()
    lines = text.splitlines()
    assert lines[0] == "dirty-neighbour: baseline pristine-6.1:default"
    header = lines[4].split()
    assert header == ["lab:default", "pristine-6.1:default"]
    # every Amean row has a value per cell, and the cells' columns line up
    amean = [line for line in lines if line.startswith("Amean")]
    assert amean and all(len(line) == len(lines[4]) for line in amean)
    cmp = pd.read_csv(os.path.join(out, "dirty-neighbour", "compare.csv"))
    assert set(cmp["arm"]) == {"lab:default", "pristine-6.1:default"}
    psi = cmp[cmp["metric"] == "nb_psi_some_s"].set_index("arm")
    # pristine's copies were scaled 1.2 and 1.3, lab's 1 and 1.1
    assert psi.loc["pristine-6.1:default", "mean"] / psi.loc["lab:default", "mean"] == \
        pytest.approx(1.25 / 1.05, rel=1e-3)
    runs = pd.read_csv(os.path.join(out, "runs.csv"))
    assert sorted(set(runs["kernel"])) == ["lab", "pristine-6.1"]
    with open(os.path.join(out, "report.md")) as f:
        assert "pristine-6.1:default" in f.read()


def test_scenario_notes_name_cells_and_ignore_the_kernel_label(tmp_path):
    two_kernels(tmp_path)
    runs = [load.Run(tmp_path / p) for p in (DEFAULT_RUN, PRISTINE)]
    runs[1].params = {**runs[1].params, "KERNEL_LABEL": "pristine-6.1", "NEIGHBOUR_S": "5"}
    notes = validate.scenario_notes(runs)
    assert len(notes) == 1
    assert notes[0].startswith("arms lab:default and pristine-6.1:default differ in parameters: "
                               "NEIGHBOUR_S=")
    assert "KERNEL_LABEL" not in notes[0]


def test_old_runs_and_labelled_runs_of_the_lab_kernel_share_a_cell(tmp_path):
    # The real run is from before the kernel axis; a new one of the same
    # kernel has the label in its folder, provenance and parameters.
    shutil.copytree(os.path.join(FIXTURES, DEFAULT_RUN), tmp_path / DEFAULT_RUN)
    new = relabel(tmp_path, "dirty-neighbour/20261203T231533Z-lab-default", "lab",
                  open(os.path.join(FIXTURES, DEFAULT_RUN, "kernel-build-id.txt")).read().strip())
    with open(new / "params-resolved.env", "a") as f:
        f.write("KERNEL_LABEL=lab\n")
    assert "KERNEL_LABEL" in load.Run(new).params
    d = collect.Dataset(tmp_path)
    assert d.runs["valid"].all(), d.runs[["run", "reason"]]
    assert list(d.runs["arm"]) == ["default", "default"] and d.kernels == ["lab"]


@pytest.mark.parametrize("speeds,noted", [((20, 22), False), ((20, 40), True), ((20, None), False)])
def test_a_spread_of_guest_cpu_speed_is_noted(tmp_path, speeds, noted):
    """One host ran the same build twice as fast 4 h apart: runs whose
    guests hashed at different speeds are named, not silently compared."""
    two_kernels(tmp_path)
    runs = [load.Run(tmp_path / p) for p in (DEFAULT_RUN, DEFAULT_RUN + ".2")]
    for r, mbps in zip(runs, speeds):
        with open(r.file("guest-state.txt"), "a") as f:
            f.write(f"guest_cpu_mbps={mbps}\n" if mbps else "")
    runs = [load.Run(r.path) for r in runs]
    assert [r.guest_cpu_mbps for r in runs] == list(speeds)
    notes = [n for n in validate.scenario_notes(runs) if "CPU speed" in n]
    if noted:
        assert notes == [f"the guest's CPU speed varies 2.00x across the runs compared "
                         f"(20 MB/s in {runs[0].name}, 40 MB/s in {runs[1].name}; "
                         "guest-state.txt guest_cpu_mbps): compare cells of one speed"]
    else:
        assert notes == []


def test_runs_on_kept_disks_do_not_share_a_cell_with_runs_that_laid_out(tmp_path):
    """A stick booted on kept disks wrote its writeback in other bursts
    than one that laid its files out: the odd one out is named."""
    two_kernels(tmp_path)
    runs = {i: load.Run(tmp_path / p) for i, p in enumerate((DEFAULT_RUN, DEFAULT_RUN + ".2"))}
    assert validate.arm_problems(runs) == {}
    relabel(tmp_path, DEFAULT_RUN + ".3", "lab", runs[0].build_id)   # a third run
    for i, mode in ((1, "save 0123abcd"), (2, "cached 0123abcd")):
        with open(tmp_path / (DEFAULT_RUN + ("", ".2", ".3")[i]) / "provenance.txt", "a") as f:
            f.write(f"layout={mode}\n")
    runs = {i: load.Run(tmp_path / (DEFAULT_RUN + n)) for i, n in enumerate(("", ".2", ".3"))}
    runs[2].params = runs[0].params
    assert validate.arm_problems(runs) == {
        2: "mixed arm: disks kept differs from the arm's laid out"}
