"""writeback-cp.csv, the writeback-cp scenario's own output (its shape,
scenarios/shapes/writeback-cp.sh): a row per alloc iteration, lab-alloc's
figures then the vmstat deltas over the alloc."""
import csv
import math
import os

import pandas as pd

from memcg_lab import run

# lab-alloc's keys (guest-rootfs/tools/lab-alloc.c), the first columns of
# writeback-cp.csv after "iteration"; the vmstat deltas the scenario adds
# after them repeat some (compact_*, thp_fault_*) over a wider window.
ALLOC_KEYS = ["size_mib", "madv_hugepage", "elapsed_s", "user_s", "sys_s", "anon_huge_kb",
              "thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_success",
              "compact_fail"]
# What lab-alloc and the scenario write for a counter the kernel lacks.
NOT_AVAILABLE = {"not available", "na"}


def column_names(header, path):
    """writeback-cp.csv's header as unique names: "iteration", lab-alloc's
    keys, and the scenario's vmstat deltas as "vmstat.<key>" (so its
    compact_stall is vmstat.compact_stall, lab-alloc's compact_stall)."""
    names = []
    for name in header:
        if name != "iteration" and (name not in ALLOC_KEYS or name in names):
            name = "vmstat." + name
        if name in names:
            raise run.RunError(f"{path}: column {name} twice")
        names.append(name)
    if "iteration" not in names:
        raise run.RunError(f"{path}: no iteration column")
    return names


def read(path):
    """writeback-cp.csv (a row per alloc iteration), or None without it;
    a counter the kernel lacks is NaN."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        reader = csv.reader(f)
        names = column_names(next(reader, []), path)
        rows = []
        for lineno, row in enumerate(reader, start=2):
            if len(row) != len(names):
                raise run.RunError(f"{path}:{lineno}: expected {len(names)} fields, got {len(row)}")
            try:
                rows.append([math.nan if v in NOT_AVAILABLE else float(v) for v in row])
            except ValueError as e:
                raise run.RunError(f"{path}:{lineno}: {e}") from None
    return pd.DataFrame(rows, columns=names)
