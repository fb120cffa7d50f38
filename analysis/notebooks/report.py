"""The report notebook in percent format.  `make report` executes it
headless into report.html (memcg_lab/notebook.py); it only shows what
memcg_lab computed, so all numbers are also in the report's files.
Open it by hand with MEMCG_LAB_REPORT=<report folder> set."""
# %% [markdown]
# # memcg-lab report
#
# Runs, exclusions, the comparison tables and figures of one report
# folder (`RESULTS/report/<timestamp>/`).

# %%
import os

import pandas as pd
from IPython.display import Image, Markdown, display

REPORT = os.environ["MEMCG_LAB_REPORT"]
runs = pd.read_csv(os.path.join(REPORT, "runs.csv"), keep_default_na=False)
print(REPORT)
runs[["scenario", "arm", "run", "valid", "reason", "kernel_build_id", "phase_s"]]

# %% [markdown]
# ## Excluded runs
# Runs that are incomplete, failed, mislabelled, missed their precondition
# or do not match the rest of their arm are left out of every number below.

# %%
excluded = runs[runs["valid"].astype(str) != "True"]
display(Markdown("none") if excluded.empty else excluded[["run", "reason"]])

# %% [markdown]
# ## Per scenario

# %%
for scenario in sorted(runs["scenario"].unique()):
    sdir = os.path.join(REPORT, scenario)
    display(Markdown(f"### {scenario}"))
    for name in ("compare.txt", "percentiles.txt", "probe-histogram.txt", "writeback-cp.txt",
                 "proactive.txt"):
        path = os.path.join(sdir, name)
        if os.path.exists(path):
            with open(path) as f:
                print(f.read())
    for png in sorted(p for p in os.listdir(sdir) if p.endswith(".png")):
        display(Markdown(f"`{png}`"), Image(filename=os.path.join(sdir, png)))
