"""sampler-cost.csv, the sampler-cost scenario's own output (its shape,
scenarios/shapes/dirty-neighbour.sh, measure_sampler_configs): a row per
lab-sampler run, with the configuration, its arguments, the rows it
wrote and its exit line."""
import csv
import os

from memcg_lab import run


def read(path):
    """sampler-cost.csv (the sampler-cost scenario: a row per sampler run,
    with its exit line as in sampler.log)
    per configuration, in file order: runs, CPU as % of one CPU (median,
    min, max), ms of CPU per tick and rows per tick (medians), and the
    median % against the first configuration's.  None without the file."""
    if not os.path.exists(path):
        return None
    configs = {}
    with open(path, newline="") as f:
        for lineno, r in enumerate(csv.DictReader(f), start=2):
            cost = run.parse_sampler_cost(r.get("exit_line") or "")
            try:
                rows = int(r["rows"])
            except (KeyError, TypeError, ValueError):
                cost = None
            if not cost:
                raise run.RunError(f"{path}:{lineno}: not a sampler-cost row")
            ticks, wall, cpu = cost["ticks"], cost["wall_s"], cost["cpu_s"]
            if ticks <= 0 or wall <= 0:
                raise run.RunError(f"{path}:{lineno}: no ticks or no time")
            c = configs.setdefault(r["config"], {"args": r["args"], "pct": [],
                                                 "ms_per_tick": [], "rows_per_tick": []})
            c["pct"].append(100 * cpu / wall)
            c["ms_per_tick"].append(1000 * cpu / ticks)
            c["rows_per_tick"].append(rows / ticks)
    if not configs:
        raise run.RunError(f"{path}: no rows")
    out, first = {}, None
    for name, c in configs.items():
        pct = run.percentile(c["pct"], 50)
        first = pct if first is None else first
        out[name] = {"args": c["args"], "runs": len(c["pct"]), "cpu_pct_median": pct,
                     "cpu_pct_min": min(c["pct"]), "cpu_pct_max": max(c["pct"]),
                     "ms_per_tick_median": run.percentile(c["ms_per_tick"], 50),
                     "rows_per_tick_median": run.percentile(c["rows_per_tick"], 50),
                     "of_first": pct / first if first else None}
    return out
