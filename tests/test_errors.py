"""Every exception class WMRL and its plugins and integrations define derives from
:class:`wmrl_core.errors.WMRLError`, so a caller can catch them all, and ``wmrl`` prints them as
one-line errors. Read from the source (no imports: the plugins need Docker, a simulator or verl)."""

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [ROOT / "wmrl_core", *sorted(ROOT.glob("plugins/*/wmrl_*")), *sorted(ROOT.glob("integrations/*/wmrl_*"))]

PRIVATE = {"_PastDeadline": "StepFaults._call raises it and its only caller, StepFaults.predictions, catches it"}
"""Exceptions that never leave the module that defines them, and why."""


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ast.unparse(node)


def _classes() -> dict[str, list[tuple[str, list[str]]]]:
    """Class name -> (where, base names) of every class the packages define."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(node.name, []).append((where, [_base_name(b) for b in node.bases]))
    return found


def _derives(name: str, classes: dict, target: object, seen: frozenset = frozenset()) -> bool:
    """Whether the class called ``name`` derives from ``target``: a builtin class, or ``"WMRLError"``."""
    if name == target:
        return True
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and isinstance(target, type):
        return issubclass(builtin, target)
    if name in seen:
        return False
    return any(_derives(base, classes, target, seen | {name}) for _, bases in classes.get(name, []) for base in bases)


def test_every_exception_class_derives_from_wmrl_error():
    classes = _classes()
    exceptions = {
        name
        for name in classes
        if (_derives(name, classes, BaseException) or name.endswith(("Error", "Exception")))
        and not _derives(name, classes, Warning)  # warning categories are issued, not raised
    }
    assert {"MissingGradientsError", "WorkerCrashed", "InvalidPredictions", "DockerUnavailableError"} <= exceptions
    outside = sorted(
        f"{where} {name}({', '.join(bases)})"
        for name in exceptions - PRIVATE.keys() - {"WMRLError"}
        for where, bases in classes[name]
        if not any(_derives(base, classes, "WMRLError") for base in bases)
    )
    assert not outside, "derive these from wmrl_core.errors (keep a builtin base callers catch):\n" + "\n".join(outside)
