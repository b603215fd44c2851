"""Studies that live in a checkout, not in an installed package.

A pre-registered study (its run module, analysis, pre-registration, archive and page builder) is
research, not product: like scikit-learn's ``benchmarks/`` it sits in a top-level
``experiments/<study>/`` folder of the repository and is never installed. ``wmrl experiment``
finds the studies of the *current directory* the way pytest finds ``conftest.py`` files: every
``experiments/<study>/study.py`` is imported as ``experiments.<study>.study`` (the current
directory put on ``sys.path``) and registered as a plugin, so it adds its experiments through the
same ``wmrl_register_experiments`` hook as an installed plugin::

    # experiments/my_study/study.py
    from wmrl_core import hookimpl

    @hookimpl
    def wmrl_register_experiments(table):
        table.add("my-study", "experiments.my_study.run:main", description="...")

Outside a checkout there is no ``experiments/`` folder and only the installed experiments are
listed.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from wmrl_core.errors import WMRLError

__all__ = ["STUDIES_DIR", "STUDY_FILE", "find_studies", "register_studies"]

STUDIES_DIR = "experiments"
STUDY_FILE = "study.py"


def find_studies(root: str | Path | None = None) -> list[Path]:
    """The ``study.py`` files under ``ROOT/experiments/*/`` (default: the current directory), sorted."""
    base = Path.cwd() if root is None else Path(root)
    return sorted((base / STUDIES_DIR).glob(f"*/{STUDY_FILE}"))


def register_studies(pm, root: str | Path | None = None) -> list[str]:
    """Import every study of :func:`find_studies` and register it with ``pm`` (once).

    :return: the registered module names, e.g. ``["experiments.libero_grpo.study"]``.
    :raises WMRLError: a study that does not import, naming its file.
    """
    base = (Path.cwd() if root is None else Path(root)).resolve()
    files = find_studies(base)
    if files and str(base) not in sys.path:
        sys.path.insert(0, str(base))
    names = []
    for path in files:
        name = f"{STUDIES_DIR}.{path.parent.name}.{path.stem}"
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise WMRLError(
                f"the study {path} does not import ({type(exc).__name__}: {exc}); fix it, or run "
                f"wmrl outside {base} to list the installed experiments only"
            ) from exc
        if pm.get_plugin(name) is None:
            pm.register(module, name=name)
        names.append(name)
    return names
