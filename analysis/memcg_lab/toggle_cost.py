"""toggle-cost.csv, the tracepoint-toggle scenario's own output (its
shape, scenarios/shapes/tracepoint-toggle.sh): the dirtier's pgscan and
system CPU at each switch of lab-reclaim-attrib."""
import csv
import os

from memcg_lab import run


def read(path):
    """tracepoint-toggle's attribution benchmark (toggle-cost.csv: the
    dirtier's pgscan and system CPU at each switch of lab-reclaim-attrib):
    per kind of window ("on", "off") the pages scanned, the system CPU and
    the CPU per 1000 pages, and on/off, the tool's cost to the reclaimer
    as a ratio in one run; None without the file."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    sums = {"on": [0, 0], "off": [0, 0]}
    for a, b in zip(rows, rows[1:]):
        try:
            pages = int(b["pgscan"]) - int(a["pgscan"])
            usec = int(b["system_usec"]) - int(a["system_usec"])
        except (KeyError, ValueError) as e:
            raise run.RunError(f"{path}: bad row: {e}") from None
        window = sums.setdefault(a["next_window"], [0, 0])
        window[0] += pages
        window[1] += usec
    out = {}
    for name, (pages, usec) in sums.items():
        out[name] = {"pages": pages, "system_s": usec / 1e6,
                     "us_per_1000_pages": usec / pages * 1000 if pages else None}
    on, off = out["on"]["us_per_1000_pages"], out["off"]["us_per_1000_pages"]
    out["on_over_off"] = on / off if on is not None and off else None
    return out
