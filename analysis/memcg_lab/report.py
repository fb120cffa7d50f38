"""A report folder from a results tree: tables, figures and an index.

Output goes to RESULTS/report/<UTC timestamp>/; an existing folder is
never written into, so an earlier report stays as it was.
"""
import datetime
import os

import pandas as pd

from memcg_lab import metrics as mx
from memcg_lab import arms_table, collect, load, plots, run, stats, tables

BOX_METRICS = ["nb_psi_some_s", "nb_system_s"]


class ReportError(Exception):
    pass


def claim_folder(results, stamp=None):
    stamp = stamp or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(results, "report", stamp)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    try:
        os.mkdir(out)
    except FileExistsError:
        raise ReportError(f"{out} exists: a report is never overwritten") from None
    return out


def resolve_cell(cells, wanted):
    """The cell wanted names, or None: a cell's name, or with runs of
    several kernels an arm alone, which means that arm on the lab's own
    kernel (lab) if it has runs, else on the first kernel that has."""
    if wanted in cells:
        return wanted
    same_arm = [c for c in cells if collect.cell_parts(c)[1] == wanted]
    default = collect.cell_name(load.DEFAULT_KERNEL, wanted)
    if default in same_arm:
        return default
    return same_arm[0] if same_arm else None


def choose_baseline(arms, wanted):
    """(baseline, note): the asked-for cell (resolve_cell), else the
    default arm (the arms table's first), else the first."""
    baseline = resolve_cell(arms, wanted)
    if baseline is not None:
        return baseline, None
    fallback = resolve_cell(arms, arms_table.DEFAULT) or arms[0]
    return fallback, f"baseline arm {wanted} has no valid runs here; compared against {fallback}"


def check_baseline_name(baseline):
    """Refuses a baseline named by an arm's old name, naming the new one,
    as the runner refuses ARM=<old name>: runs of it are filed under the
    new name, and the old one would quietly match none."""
    kernel, arm = collect.cell_parts(baseline)
    if arm in arms_table.RENAMED:
        new = arms_table.RENAMED[arm]
        raise ReportError(f"baseline arm '{arm}' is now called '{new}' "
                          f"(BASELINE={collect.cell_name(kernel, new) if kernel else new})")


def representative_run(ds, scenario, arm):
    """The run of an arm whose neighbour PSI some is the median (the
    first run when that metric is missing): one time series per arm."""
    runs = ds.valid_runs(scenario)
    runs = runs[runs["arm"] == arm]
    if "nb_psi_some_s" in runs and runs["nb_psi_some_s"].notna().any():
        runs = runs.sort_values("nb_psi_some_s")
    return runs.iloc[(len(runs) - 1) // 2]["run"]


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def write_table(sdir, stem, table, text, markdown=None):
    """stem.csv (the tidy table), stem.txt and, when given, stem.md."""
    table.to_csv(os.path.join(sdir, f"{stem}.csv"), index=False)
    write(os.path.join(sdir, f"{stem}.txt"), text)
    if markdown is not None:
        write(os.path.join(sdir, f"{stem}.md"), markdown)


def of_scenario(table, scenario):
    return table[table["scenario"] == scenario]


def seed_test(ds, scenario):
    """The 2011 test (stats.seed_test) every valid run of a scenario
    repeats, or None: none does, or its runs differ in THP or STICK_FS."""
    tests = {stats.seed_test(scenario, ds.loaded[r].params)
             for r in ds.valid_runs(scenario)["run"]}
    return tests.pop() if len(tests) == 1 else None


def file_sections(ds, scenario, arms, baseline, sdir):
    """Tables of the files only some runs have, for the valid runs of a
    scenario that have them: ([markdown], [text], [figure files])."""
    md, text, figs = [], [], []

    def add(stem, table, table_text, table_md):
        write_table(sdir, stem, table, table_text, table_md)
        md.append(table_md)
        text.append(table_text)

    hist = stats.pooled_histogram(of_scenario(ds.probe_histogram, scenario), arms)
    if not hist.empty:
        add("probe-histogram", hist, tables.histogram_text(hist), tables.histogram_markdown(hist))
        figs += plots.latency_histogram(hist, os.path.join(sdir, "probe-histogram"))
    iterations = of_scenario(ds.writeback_cp, scenario)
    if len(iterations):
        wb_arms = stats.arms_with_data(iterations, arms)
        t = stats.writeback_cp(iterations, wb_arms, choose_baseline(wb_arms, baseline)[0])
        test = seed_test(ds, scenario)
        beside = None if test is None else stats.beside_2011(t, stats.load_seed(), test)
        if beside is not None:
            beside.to_csv(os.path.join(sdir, "writeback-cp-2011.csv"), index=False)
        add("writeback-cp", t, tables.writeback_cp_text(t, scenario, beside),
            tables.writeback_cp_markdown(t, scenario, beside))
    calls = of_scenario(ds.proactive, scenario)
    if len(calls):
        t = stats.proactive(calls, arms)
        add("proactive", t, tables.proactive_text(t, scenario), tables.proactive_markdown(t, scenario))
    return md, text, figs


def scenario_section(ds, scenario, out, baseline_wanted):
    """Tables and figures of one scenario; returns (markdown, cover text)."""
    arms = ds.arms(scenario)
    sdir = os.path.join(out, scenario)
    os.makedirs(sdir)
    md = [f"## {scenario}", ""]
    if not arms:
        md += ["No valid runs: nothing compared.", ""]
        return "\n".join(md), f"{scenario}: no valid runs\n"
    baseline, note = choose_baseline(arms, baseline_wanted)
    notes = ds.notes.get(scenario, []) + ([note] if note else [])
    few = [a for a in arms if (ds.valid_runs(scenario)["arm"] == a).sum() < 2]
    if few:
        notes.append(f"fewer than two valid runs in {', '.join(few)}: no stddev and no "
                     "t-test there; a difference needs RUNS=5 or so to mean anything")
    md += [f"- {n}" for n in notes] + ([""] if notes else [])
    metric_table = of_scenario(ds.metrics, scenario)
    cmp = stats.compare(metric_table, arms, baseline)
    text = tables.compare_text(cmp, scenario)
    cmp_md = tables.compare_markdown(cmp, scenario)
    write_table(sdir, "compare", cmp, text, cmp_md)
    probe = of_scenario(ds.probe, scenario)
    pct = stats.latency_percentiles(probe, of_scenario(ds.fio, scenario), arms,
                                    of_scenario(ds.fio_bins, scenario))
    pct_text = tables.percentile_text(pct)
    write_table(sdir, "percentiles", pct, pct_text)
    file_md, file_text, file_figs = file_sections(ds, scenario, arms, baseline, sdir)
    head_md, head_text = headline_section(ds, scenario, metric_table, arms, baseline, sdir)
    md += head_md + [cmp_md, tables.percentile_markdown(pct)] + file_md + ["### Figures", ""]
    file_text = head_text + file_text

    figs = []
    shown = {arm: ds.loaded[representative_run(ds, scenario, arm)] for arm in arms}
    for arm, r in shown.items():
        figs += plots.timeseries(r, os.path.join(sdir, f"timeseries-{arm}"))
    figs += plots.psi_overlay(shown, os.path.join(sdir, "neighbour-psi"))
    figs += plots.boxplots(metric_table, arms, BOX_METRICS, os.path.join(sdir, "neighbour-cost"))
    figs += plots.latency_cdf(probe, arms, os.path.join(sdir, "probe-latency-cdf"))
    figs += file_figs
    figs += plots.clat_percentiles(of_scenario(ds.fio, scenario), arms,
                                   os.path.join(sdir, "fio-clat"),
                                   bins=of_scenario(ds.fio_bins, scenario))
    attr = of_scenario(ds.attribution, scenario)
    if attr.empty:
        md += ["- attribution heat map: skipped, no run has attribution.csv "
               "(the tracefs reader did not run)", ""]
    for arm in arms:
        figs += plots.attribution_heatmap(attr, arm, os.path.join(sdir, f"attribution-{arm}"))
    md += [f"![{os.path.basename(f)}]({os.path.relpath(f, out)})" for f in figs if f.endswith(".png")]
    md.append("")
    cover_notes = "".join(f"note: {n}\n" for n in notes)
    return "\n".join(md), "\n".join([text + cover_notes, pct_text] + file_text)


def headline_section(ds, scenario, metric_table, arms, baseline, sdir):
    """The neighbour's excess cost over the scenario's floor (stats.FLOORS)
    per arm, 1 - excess(arm)/excess(baseline) with its interval, and the
    guards: ([markdown], [text]); nothing for a scenario without a floor,
    a note when the floor has no valid runs."""
    floor = stats.FLOORS.get(scenario)
    if floor is None:
        return [], []
    floor_table = of_scenario(ds.metrics, floor)
    if floor_table.empty:
        line = (f"headline: no valid {floor} runs, so no floor: the neighbour's excess cost "
                f"is not computed (make scenario NAME={floor})")
        return [f"- {line}", ""], [line + "\n"]
    head = stats.headline(metric_table, floor_table, arms, baseline)
    grd = stats.guards(metric_table, arms)
    floor_kernels = sorted(set(ds.valid_runs(floor)["kernel"]), key=collect.kernel_order)
    pooled = []
    if len(floor_kernels) > 1:
        # Not yet a floor per kernel: the excess of every cell is over one
        # floor mean, which says so.
        pooled = [f"note: the floor's runs of {len(floor_kernels)} kernels "
                  f"({', '.join(floor_kernels)}) are pooled into one floor"]
    head.to_csv(os.path.join(sdir, "headline.csv"), index=False)
    grd.to_csv(os.path.join(sdir, "guards.csv"), index=False)
    text = [f"headline: the neighbour's excess cost over {floor} (floor runs of any arm), "
            f"per MiB of its work; reduction = 1 - excess(arm)/excess({baseline}), "
            "95% bootstrap interval"] + pooled
    md = ["### Headline: excess over the floor", "",
          f"Floor: `{floor}` ({int(head['floor_runs'].max()) if len(head) else 0} valid runs). "
          f"Reduction = 1 - excess(arm) / excess({baseline}); 95 % bootstrap interval over runs. "
          "Raw PSI stays in the table below.", ""] + [line for n in pooled for line in (f"- {n}", "")] + [
          "| cost | arm | runs | mean | floor | excess | reduction | 95% interval |",
          "|---|---|---|---|---|---|---|---|"]
    for r in head.itertuples():
        red = "n/a" if r.reduction is None or pd.isna(r.reduction) else f"{r.reduction:+.0%}"
        ci = ("n/a" if r.ci_low is None or pd.isna(r.ci_low)
              else f"[{r.ci_low:+.0%}, {r.ci_high:+.0%}]")
        unit = mx.BY_NAME[r.metric].unit
        md.append(f"| {r.cost} ({unit}) | {r.arm} | {r.runs} | {r.mean:.3g} | {r.floor_mean:.3g} "
                  f"| {r.excess:.3g} | {red} | {ci} |")
        text.append(f"  {r.cost:6s} {r.arm:10s} n={r.runs} mean {r.mean:.3g} {unit}, excess "
                    f"{r.excess:.3g}, reduction {red} {ci}")
    lat = stats.probe_excess(of_scenario(ds.probe, scenario), of_scenario(ds.probe, floor), arms)
    lat.to_csv(os.path.join(sdir, "probe-excess.csv"), index=False)
    if len(lat):
        md += ["", "Probe fault latency over the floor's (bursts of all runs pooled):", "",
               "| arm | quantile | bursts | ms | floor ms | excess ms |", "|---|---|---|---|---|---|"]
    for r in lat.itertuples():
        md.append(f"| {r.arm} | {r.quantile} | {r.bursts} | {r.ms:.0f} | {r.floor_ms:.0f} "
                  f"| {r.excess_ms:.0f} |")
        text.append(f"  probe  {r.arm:10s} {r.quantile} {r.ms:.0f} ms over the floor's "
                    f"{r.floor_ms:.0f} ms: {r.excess_ms:+.0f} ms ({r.bursts} bursts)")
    md += ["", "Guards (valid runs that break them):", ""]
    for r in grd.itertuples():
        mark = "ok" if r.failed == 0 else f"**{r.failed} of {r.runs} runs break it**"
        md.append(f"- {r.arm}: {r.guard}: {mark} (worst {r.worst:.3g})")
        text.append(f"  guard {r.arm}: {r.guard}: "
                    + ("ok" if r.failed == 0 else f"{r.failed} of {r.runs} runs break it"))
    return md + [""], ["\n".join(text) + "\n"]


def sampler_cost_lines(runs):
    """The sampler's CPU cost per configuration (interval of every file,
    of the slow files, cgroups and /proc/vmstat read wholly at the slow
    rate) over all runs
    that report it: the issue's budget is 1% of one CPU at 100 ms."""
    if "sampler_cpu_pct" not in runs:
        return []
    have = runs.dropna(subset=["sampler_cpu_pct"])
    lines = []
    slow = have.get("sampler_slow_interval_ms", have["sampler_interval_ms"])
    unknown = have["sampler_cpu_pct"] * float("nan")
    cgroups = have.get("sampler_slow_cgroups", unknown)
    vmstat = have.get("sampler_vmstat_slow", unknown).astype(float)
    keys = [have["sampler_interval_ms"].fillna(-1), slow.fillna(-1), cgroups.fillna(-1),
            vmstat.fillna(-1)]
    for (interval, slow_ms, slow_cgs, vmstat_slow), g in have.groupby(keys):
        at = run.sampler_intervals(interval if interval >= 0 else None,
                                   slow_ms if slow_ms >= 0 else None,
                                   slow_cgs if slow_cgs >= 0 else None,
                                   vmstat_slow == 1)
        lines.append(f"- sampler cost at {at}: median {g['sampler_cpu_pct'].median():.2f}%, "
                     f"max {g['sampler_cpu_pct'].max():.2f}% of one CPU ({len(g)} run(s))")
    return lines + ([""] if lines else [])


def build(results, baseline=arms_table.DEFAULT, stamp=None):
    """Writes the report; returns (folder, dataset)."""
    if not os.path.isdir(results):
        raise ReportError(f"{results}: no such results folder")
    check_baseline_name(baseline)
    ds = collect.Dataset(results)
    if ds.runs.empty:
        raise ReportError(f"{results}: no run folders (<timestamp>-<kernel>-<arm>) found")
    out = claim_folder(results, stamp)
    ds.runs.to_csv(os.path.join(out, "runs.csv"), index=False)
    ds.metrics.to_csv(os.path.join(out, "metrics.csv"), index=False)
    ds.probe.to_csv(os.path.join(out, "probe-latency.csv"), index=False)
    ds.fio.to_csv(os.path.join(out, "fio.csv"), index=False)
    if not ds.attribution.empty:
        ds.attribution.to_csv(os.path.join(out, "attribution.csv"), index=False)
    excluded = ds.excluded()
    md = [f"# memcg-lab report: {results}", "",
          f"{len(ds.runs)} run folders, {int(ds.runs['valid'].sum())} used, "
          f"{len(excluded)} excluded.", ""] + sampler_cost_lines(ds.runs)
    if len(excluded):
        md += ["## Excluded runs", "", "| run | reason |", "|---|---|"]
        md += [f"| {r.run} | {r.reason} |" for r in excluded.itertuples()]
        md.append("")
        write(os.path.join(out, "excluded.txt"),
              "".join(f"{r.run}: {r.reason}\n" for r in excluded.itertuples()))
    crashed = ds.kernel_failures()
    if len(crashed):
        md += ["## Runs the guest kernel failed", "",
               "A panic, oops, WARN, lockup or hang is a finding, not a flake: these runs "
               "are counted here and never retried by the matrix.  An emulator fault is an "
               "int3 oops where memory held no int3: QEMU TCG ran kernel text that had been "
               "patched (lab/README.md, \"Tracing\"); counted apart, and run again by the "
               "matrix.", "",
               "| scenario | arm | runs | kernel failed | emulator fault | first reason |",
               "|---|---|---|---|---|---|"]
        md += [f"| {r.scenario} | {r.arm} | {r.runs} | {r.kernel_failed} | {r.emulator_failed} "
               f"| {r.example} |" for r in crashed.itertuples()]
        md.append("")
        crashed.to_csv(os.path.join(out, "kernel-failures.csv"), index=False)
    cover = []
    for scenario in ds.scenarios():
        section, text = scenario_section(ds, scenario, out, baseline)
        md.append(section)
        cover.append(text)
    if len(excluded):
        cover.append(f"{len(excluded)} run(s) excluded, see excluded.txt\n")
    if len(crashed):
        cover.append(f"{int(crashed['kernel_failed'].sum())} run(s) failed by the guest kernel, "
                     f"{int(crashed['emulator_failed'].sum())} by an emulator fault, "
                     "see kernel-failures.csv\n")
    write(os.path.join(out, "cover-letter.txt"), "\n".join(cover))
    write(os.path.join(out, "report.md"), "\n".join(md))
    return out, ds
