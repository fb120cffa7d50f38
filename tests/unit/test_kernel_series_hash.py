"""lab/lib.sh's kernel_series_hash: the key of the kernel tree and the
bzImage covers the patches that change what a kernel build reads, so a
change to the series' selftest alone does not reapply and rebuild the
kernel, while any change to a kernel patch does."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def patch(paths, body):
    """A minimal git-format patch touching PATHS; BODY makes versions differ."""
    hunks = "".join(
        f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-old\n+{body}\n"
        for p in paths)
    return f"From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n{hunks}"


def lab_root(tmp_path, patches):
    """A lab root with lab/lib.sh and PATCHES (name -> text) in series order."""
    root = tmp_path / "labroot"
    (root / "lab").mkdir(parents=True, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "lab", "lib.sh"), root / "lab" / "lib.sh")
    pdir = root / "patches"
    if pdir.exists():
        shutil.rmtree(pdir)
    pdir.mkdir()
    for name, text in patches.items():
        (pdir / name).write_text(text)
    (pdir / "series").write_text("".join(n + "\n" for n in patches))
    return root


def hashes(root):
    out = subprocess.run(
        ["bash", "-c", "set -euo pipefail; . lab/lib.sh; kernel_series_hash; series_hash"],
        cwd=root, check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == 2
    return out


def series(mm="1", selftest="1", mixed="1"):
    return {
        "0001-mm.patch": patch(["mm/vmscan.c", "include/linux/mm.h"], mm),
        "0002-mixed.patch": patch(["mm/swap.c", "Documentation/mm/x.rst"], mixed),
        "0003-selftest.patch": patch(["tools/testing/selftests/cgroup/t.c",
                                     "MAINTAINERS"], selftest),
    }


def test_a_selftest_change_keeps_the_kernel_key(tmp_path):
    before = hashes(lab_root(tmp_path, series()))
    after = hashes(lab_root(tmp_path, series(selftest="2")))
    assert after[0] == before[0]
    assert after[1] != before[1], "the whole series' hash must still see it"


def test_a_kernel_patch_change_changes_the_kernel_key(tmp_path):
    before = hashes(lab_root(tmp_path, series()))
    assert hashes(lab_root(tmp_path, series(mm="2")))[0] != before[0]
    # A patch with one kernel file among documentation is a kernel patch.
    assert hashes(lab_root(tmp_path, series(mixed="2")))[0] != before[0]


def test_dropping_the_selftest_keeps_the_kernel_key(tmp_path):
    full = series()
    before = hashes(lab_root(tmp_path, full))
    del full["0003-selftest.patch"]
    assert hashes(lab_root(tmp_path, full))[0] == before[0]


def test_series_order_is_part_of_the_kernel_key(tmp_path):
    full = series()
    before = hashes(lab_root(tmp_path, full))
    swapped = {k: full[k] for k in ("0002-mixed.patch", "0001-mm.patch",
                                    "0003-selftest.patch")}
    assert hashes(lab_root(tmp_path, swapped))[0] != before[0]
