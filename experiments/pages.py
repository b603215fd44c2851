"""Every results page under ``docs/results`` and how it is rebuilt from what the repository holds.

    python -m experiments.pages            # rebuild every page that has a builder, in place
    python -m experiments.pages --check    # rebuild each into a temporary folder; exit 1 if one differs
    python -m experiments.pages --list     # every page: its builder, or why it has none

A page with a builder is regenerated from its study's archive (or, for studies whose runs were not
archived, from the every-seed JSON committed beside it) by one command; a page without one says why
(its runs were never committed, it is hand-written prose, or it is a pre-registration). A new page
must be added to :data:`PAGES`, :data:`NOT_REBUILT` or :data:`UNARCHIVED` (the test of this module fails
otherwise).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


@dataclass(frozen=True)
class Page:
    """A page (its folder under ``docs/results`` and the files the builder writes there) and its builder:
    ``build(out)`` writes those files into ``out``."""

    folder: str
    files: tuple[str, ...]
    build: Callable[[Path], int]
    command: str


def _equal_execution(out: Path) -> int:
    from experiments.autoresearch_equal_execution import page

    return page.main(["--out", str(out)])


def _heldout_gain(folder: str) -> Callable[[Path], int]:
    def build(out: Path) -> int:
        from experiments.autoresearch_heldout_gain import page

        return page.main(["--record", str(RESULTS / folder / "heldout_gain.json"), "--out", str(out)])

    return build


def _lambda_estimates(out: Path) -> int:
    from experiments.autoresearch_lambda_estimates import page

    return page.main(
        ["--record", str(RESULTS / "autoresearch/lambda_estimates/lambda_estimates.json"), "--out", str(out)]
    )


def _noise_control(out: Path) -> int:
    from experiments.autoresearch_noise_control import page

    shutil.copy(RESULTS / "autoresearch/noise_control.md", out / "noise_control.md")  # the builder fills its table
    return page.main(["--record", str(RESULTS / "autoresearch/noise_control.json"), "--out", str(out)])


def _libero_transfer(module: str, archive: str) -> Callable[[Path], int]:
    def build(out: Path) -> int:
        import importlib

        main = importlib.import_module(f"experiments.libero_transfer.{module}").main
        copy = out / "_archive"
        shutil.copytree(ROOT / "experiments/libero_transfer/archive" / archive, copy)  # the builder reads it only
        try:
            return main(["--report-only", "--archive", str(copy), "--docs", str(out)])
        finally:
            shutil.rmtree(copy)

    return build


def _libero_positive_control(out: Path) -> int:
    from experiments.libero_grpo import positive_control

    with tempfile.TemporaryDirectory(prefix="wmrl-runs-") as runs:  # report-only restores the archive into it
        return positive_control.main(["--report", "--out", str(out), "--runs", runs])


def _gradient_snr(out: Path) -> int:
    from experiments.libero_grpo import gradient_snr

    records = [ROOT / f"experiments/libero_grpo/gradient_snr_seed{seed}.json" for seed in (5300, 5301)]
    return gradient_snr.report(records, out)


def _fusion_defaults(out: Path) -> int:
    import subprocess

    archive = RESULTS / "synthetic/fusion_defaults/runs.json.gz"
    in_place = out.resolve() == archive.parent.resolve()
    if not in_place:  # the report reads the archive from its --out folder
        shutil.copy(archive, out / "runs.json.gz")
    command = [sys.executable, "-m", "experiments.fusion_defaults.synthetic", "report", "--from-archive"]
    done = subprocess.run([*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    if not in_place:
        (out / "runs.json.gz").unlink()
    return done.returncode


def _synthetic_theorem(out: Path) -> int:
    from experiments.synthetic import theorem

    return theorem.main(
        ["--from-archive", str(ROOT / "experiments/synthetic/archive/theorem.json.gz"), "--out", str(out)]
    )


def _noise_weight(name: str, overrides: tuple[str, ...]) -> Callable[[Path], int]:
    def build(out: Path) -> int:
        from experiments.synthetic import noise_weight

        stored = RESULTS / f"synthetic/{name}.json"
        argv = ["--from-json", str(stored), "--seeds", "0-19", "--steps", "30", "--fractions", "0.1", "0.05"]
        return noise_weight.main([*argv, "--report", str(out / f"{name}.md"), "--", *overrides])

    return build


def _value_check(out: Path) -> int:
    from experiments.synthetic import value_check

    archive = RESULTS / "synthetic/value_check_runs.json.gz"
    return value_check.main(["--from-archive", "--archive", str(archive), "--report", str(out / "value_check.md")])


def _user_domain(out: Path) -> int:
    from experiments.fusion_defaults import user_domain

    stored = RESULTS / "synthetic/fusion_defaults/user_domain.json"
    return user_domain.main(["--from-json", str(stored), "--out", str(out)])


PAGES: tuple[Page, ...] = (
    Page(
        "autoresearch/equal_execution",
        ("table.md", "summary.json", "equal_execution.png"),
        _equal_execution,
        "python -m experiments.autoresearch_equal_execution.page",
    ),
    Page(
        "autoresearch",
        ("heldout_gain_table.md", "heldout_gain.png"),
        _heldout_gain("autoresearch"),
        "python -m experiments.autoresearch_heldout_gain.page",
    ),
    Page(
        "autoresearch/heldout_gain_outcome_wm",
        ("heldout_gain_table.md", "heldout_gain.png"),
        _heldout_gain("autoresearch/heldout_gain_outcome_wm"),
        "python -m experiments.autoresearch_heldout_gain.page --out docs/results/autoresearch/heldout_gain_outcome_wm",
    ),
    Page(
        "autoresearch/lambda_estimates",
        ("lambda_estimates.md",),
        _lambda_estimates,
        "python -m experiments.autoresearch_lambda_estimates.page",
    ),
    Page(
        "autoresearch",
        ("noise_control.md",),
        _noise_control,
        "python -m experiments.autoresearch_noise_control.page",
    ),
    Page(
        "libero",
        ("transfer_full.md", "transfer_full.json"),
        _libero_transfer("transfer", "full"),
        "python -m experiments.libero_transfer.transfer --report-only --archive experiments/libero_transfer/archive/full",
    ),
    Page(
        "libero/transfer_resolving",
        ("transfer_resolving.md", "transfer_resolving.json"),
        _libero_transfer("resolving", "resolving"),
        "python -m experiments.libero_transfer.resolving --report-only --archive "
        "experiments/libero_transfer/archive/resolving",
    ),
    Page(
        "libero/positive_control",
        ("README.md", "positive_control.json"),
        _libero_positive_control,
        "python -m experiments.libero_grpo.positive_control --report",
    ),
    Page(
        "libero/gradient_snr",
        ("README.md",),
        _gradient_snr,
        "python -m experiments.libero_grpo.gradient_snr --report docs/results/libero/gradient_snr --from "
        "experiments/libero_grpo/gradient_snr_seed5300.json experiments/libero_grpo/gradient_snr_seed5301.json",
    ),
    Page(
        "synthetic/fusion_defaults",
        ("README.md", "summary.json"),
        _fusion_defaults,
        "python -m experiments.fusion_defaults.synthetic report --from-archive --out docs/results/synthetic/fusion_defaults",
    ),
    Page(
        "synthetic/fusion_defaults",
        ("user_domain.md", "user_domain.json"),
        _user_domain,
        "python -m experiments.fusion_defaults.user_domain --from-json "
        "docs/results/synthetic/fusion_defaults/user_domain.json --out docs/results/synthetic/fusion_defaults",
    ),
    Page(
        "synthetic",
        ("table.md", "summary.json", "reward_vs_compute.png", "diagnostics.png", "policy_evaluation.md"),
        _synthetic_theorem,
        "python -m experiments.synthetic.theorem --from-archive experiments/synthetic/archive/theorem.json.gz "
        "--out docs/results/synthetic",
    ),
    Page(
        "synthetic",
        ("value_check.md", "value_check.json"),
        _value_check,
        "python -m experiments.synthetic.value_check --from-archive --report docs/results/synthetic/value_check.md",
    ),
    *(
        Page(
            "synthetic",
            (f"{name}.md", f"{name}.json"),
            _noise_weight(name, overrides),
            f"python -m experiments.synthetic.noise_weight --from-json docs/results/synthetic/{name}.json --seeds 0-19 "
            f"--steps 30 --fractions 0.1 0.05 --report docs/results/synthetic/{name}.md"
            + "".join(f" -- {o}" for o in overrides),
        )
        for name, overrides in (
            ("noise_weight_runs", ()),
            ("noise_weight_inverse_variance", ("fusion.method=inverse_variance",)),
            ("noise_weight_shrinkage", ("fusion.method=shrinkage",)),
        )
    ),
)
"""The pages rebuilt from the repository, each by one command."""

NOT_REBUILT: dict[str, str] = {
    "README.md": "the index of the results pages (prose)",
    "autoresearch/equal_execution/README.md": "prose around the rebuilt table.md",
    "autoresearch/fusion_defaults/README.md": "the pre-registered study is still running; its page is built when it ends",
    "autoresearch/lambda_estimates/README.md": "prose around the rebuilt lambda_estimates.md",
    "autoresearch/main_job.md": "the quickstart's figures, written by hand from a fresh clone's run of `bash quickstart.sh`",
    "libero/group_ranking.md": "hand-written around a table that a test checks against group_ranking.json",
    "libero/real_learns/README.md": "the pre-registered study is still running; built by its runner's --report",
    "synthetic/floor_level999_preregistration.md": "a pre-registration",
    "synthetic/floor_shrinkage_preregistration.md": "a pre-registration",
    "synthetic/README.md": "prose around the rebuilt table.md, figures and policy_evaluation.md; its section on an earlier run says it is not rebuilt",
    "synthetic/fusion_interface.md": "prose",
}
"""Pages without a builder that hold no figures of their own (prose around rebuilt tables, the index,
pre-registrations, pages a running study writes when it ends), and why."""

UNARCHIVED: dict[str, str] = {
    "autoresearch/world_model/README.md": "prose over world-model cross-validation runs",
    "autoresearch/world_model/online_update/table.md": "the executions it replayed were not recorded (a rerun is ~33 min)",
    "autoresearch/world_model/world_model_cv.md": "world-model cross-validation runs",
    "autoresearch/world_model/world_model_cv_2fold.md": "world-model cross-validation runs",
    "libero/world_models.md": "world-model report runs",
    "libero/world_models_onestep.md": "world-model report runs",
    "libero/world_models_t0-9.md": "world-model report runs",
}
"""Pages whose runs were not kept, so no command regenerates them, and why; each says so under its title
(:data:`UNARCHIVED_NOTE`). Their figures are those of the code on the date they were made. They are the ones
the docs still rely on, to be re-run with an archive; unkept pages that a newer archived one superseded were
retired (``git log --diff-filter=D -- docs/results``)."""

UNARCHIVED_NOTE = (
    "> *Not rebuilt from an archive:* the runs behind this page were not kept, so no command regenerates it; its "
    "figures are those of the code on the date it was made (`git log` on this file)."
)
"""The line every page of :data:`UNARCHIVED` carries under its title."""


def listed_pages() -> set[str]:
    """Every markdown page the three tables account for, relative to ``docs/results``."""
    built = {f"{p.folder}/{name}" for p in PAGES for name in p.files if name.endswith(".md")}
    return built | set(NOT_REBUILT) | set(UNARCHIVED)


def results_pages() -> set[str]:
    """The markdown pages under ``docs/results`` (archives excluded)."""
    return {
        str(path.relative_to(RESULTS))
        for path in RESULTS.rglob("*.md")
        if "archive" not in path.relative_to(RESULTS).parts
    }


def check(page: Page) -> list[str]:
    """Rebuild ``page`` into a temporary folder; the files that differ from the committed ones."""
    with tempfile.TemporaryDirectory(prefix="wmrl-page-") as tmp:
        out = Path(tmp)
        status = page.build(out)
        if status:
            return [f"{page.folder}: the builder exited {status}"]
        return [
            f"{page.folder}/{name}"
            for name in page.files
            if not (out / name).is_file() or not filecmp.cmp(out / name, RESULTS / page.folder / name, shallow=False)
        ]


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="rebuild into a temporary folder and compare")
    group.add_argument("--list", action="store_true", help="every page: its builder or why it has none")
    args = parser.parse_args(argv)
    unlisted = sorted(results_pages() - listed_pages())
    if unlisted:
        print(f"pages neither built nor explained in experiments/pages.py: {', '.join(unlisted)}", file=sys.stderr)
        return 1
    if args.list:
        for page in PAGES:
            print(f"{page.folder}: {', '.join(page.files)}\n    {page.command}")
        for name, why in sorted(NOT_REBUILT.items()):
            print(f"{name}: no builder: {why}")
        for name, why in sorted(UNARCHIVED.items()):
            print(f"{name}: not archived: {why}")
        return 0
    if args.check:
        differ = [d for page in PAGES for d in check(page)]
        for d in differ:
            print(f"differs from what its archive rebuilds: {d}", file=sys.stderr)
        print(f"{len(PAGES) - len({d.split(':')[0] for d in differ})} of {len(PAGES)} pages rebuilt unchanged")
        return 1 if differ else 0
    for page in PAGES:
        status = page.build(RESULTS / page.folder)
        print(f"{page.folder}: {', '.join(page.files)} ({'ok' if not status else f'exit {status}'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
