"""The rectified fuser's lambda on the program policy, against the trace-optimal lambda*."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "lambda-estimates",
        "experiments.autoresearch_lambda_estimates.lambda_estimates:main",
        description="program policy: the rectified lambda from advantage moments, whole and sketched per-group "
        "gradients, against the trace-optimal lambda* at one fixed policy (every rollout executed)",
    )
