"""Notebook pipeline of the course: jupytext sources -> .ipynb -> papermill runs -> nbval checks.

Chapter sources are py:percent files under chapters/NN-slug/ (and capstone/); `scaleout notebooks
build|run|list` and `scaleout lab` are defined in ``commands``. Importing this package stays light:
jupytext, papermill, tqdm and jupyterlab load inside the functions that use them.
"""
from .commands import register
from .show import Source, show, source_of
from .execute import RunRecord, build, format_summary, output_path, prepare, read_notebook, run, run_one
from .sources import (
    PARAMETERS_HEADER,
    NotebookError,
    check_parameters_cell,
    find_repo_root,
    find_sources,
    has_parameters_cell,
    is_notebook_source,
    notebook_name,
    smoke_parameters,
)

__all__ = [
    "PARAMETERS_HEADER", "NotebookError", "RunRecord", "build", "check_parameters_cell",
    "find_repo_root", "find_sources", "format_summary", "has_parameters_cell", "is_notebook_source",
    "notebook_name", "output_path", "prepare", "read_notebook", "register", "run", "run_one", "show", "smoke_parameters",
    "Source", "source_of",
]
