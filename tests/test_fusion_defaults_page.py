"""The fusion-defaults study's plan (experiments/fusion_defaults). That its page is what its archive
rebuilds is checked with every other page by tests/test_results_pages.py (``python -m experiments.pages --check``)."""


def test_part_4_changes_only_the_default_arms_and_runs_its_extra_decoy_seeds():
    from experiments.fusion_defaults.synthetic import V2, V2_DECOY_EXTRA, v2_plan

    plan = {group: (arms, seeds) for group, arms, seeds in v2_plan()}
    assert plan["decoy_extra"] == (plan["decoy"][0], V2_DECOY_EXTRA)
    for arms, _ in plan.values():
        for arm, overrides in arms.items():
            changed = arm.startswith("noise") or arm.endswith("-default")
            assert all(o in overrides for o in V2) == changed, arm
    seeds = [s for _, (_, group_seeds) in plan.items() for s in group_seeds]
    assert min(seeds) >= 1200 and len(set(seeds)) == len(seeds)  # past every earlier part's seeds, none twice
