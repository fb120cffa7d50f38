"""proactive.csv, the proactive scenario's own output (its shape,
scenarios/shapes/proactive.sh): a row per write to the parent's
memory.reclaim."""
import pandas as pd

from memcg_lab import load, run

COLUMNS = ["call", "duration_ns", "result", "pgscan", "pgsteal"]


def read(path):
    """proactive.csv (a row per memory.reclaim write), or None without it."""
    df = load.read_table(path, COLUMNS)
    if df is None:
        return None
    numeric = ["call", "duration_ns", "pgscan", "pgsteal"]
    if not all(pd.api.types.is_numeric_dtype(df[c]) for c in numeric) or df[numeric].isna().any().any():
        raise run.RunError(f"{path}: {', '.join(numeric)} must be numbers")
    return df[COLUMNS].astype({"result": str})
