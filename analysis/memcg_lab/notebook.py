"""The report notebook: kept as a percent-format .py (diff-friendly,
no outputs), turned into a notebook and executed headless into HTML
with Debian's nbconvert when it is installed."""
import os
import re

ANALYSIS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ANALYSIS, "notebooks", "report.py")
CELL = re.compile(r"^# %%(.*)$")


def percent_cells(text):
    """[(kind, source)] of a percent-format script; kind is 'code' or
    'markdown'.  Text before the first marker is dropped (it is the file's
    own docstring)."""
    cells, kind, lines = [], None, []
    for line in text.splitlines():
        m = CELL.match(line)
        if m:
            if kind:
                cells.append((kind, "\n".join(lines).strip("\n")))
            kind = "markdown" if "[markdown]" in m.group(1) else "code"
            lines = []
        elif kind == "markdown":
            lines.append(re.sub(r"^# ?", "", line))
        elif kind:
            lines.append(line)
    if kind:
        cells.append((kind, "\n".join(lines).strip("\n")))
    return cells


def to_notebook(text):
    import nbformat.v4 as v4
    nb = v4.new_notebook()
    nb.cells = [v4.new_markdown_cell(s) if k == "markdown" else v4.new_code_cell(s)
                for k, s in percent_cells(text)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def render(report_dir, source=SOURCE):
    """Writes report.ipynb and report.html into report_dir; returns what
    happened, as a sentence (no nbconvert is not an error)."""
    try:
        import nbformat
        from nbconvert import HTMLExporter
        from nbconvert.preprocessors import ExecutePreprocessor
    except ImportError:
        return ("no report.html: nbconvert is not installed "
                "(make deps installs jupyter-nbconvert and python3-ipykernel)")
    with open(source) as f:
        nb = to_notebook(f.read())
    # The kernel inherits the environment: it finds memcg_lab and the
    # report it is about through it.
    os.environ["MEMCG_LAB_REPORT"] = os.path.abspath(report_dir)
    os.environ["PYTHONPATH"] = ANALYSIS + os.pathsep + os.environ.get("PYTHONPATH", "")
    # ipykernel's debugger warns about frozen modules on every start.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    try:
        ExecutePreprocessor(timeout=600, kernel_name="python3").preprocess(
            nb, {"metadata": {"path": report_dir}})
    except Exception as e:  # a broken notebook must not lose the report
        nbformat.write(nb, os.path.join(report_dir, "report.ipynb"))
        return f"no report.html: the notebook failed: {str(e).strip().splitlines()[-1]}"
    nbformat.write(nb, os.path.join(report_dir, "report.ipynb"))
    html, _ = HTMLExporter().from_notebook_node(nb)
    path = os.path.join(report_dir, "report.html")
    with open(path, "w") as f:
        f.write(html)
    return f"wrote {path}"
