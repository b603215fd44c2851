"""A sandbox backend added by a package outside the plugin (``tests/sandbox_plugin``, installed here
under the ``wmrl`` entry-point group as pip would install it) is listed, executes and trains through
``AutoResearchEnvironment(sandbox="fake-remote")``, with no edit of the AutoResearch plugin; the pool
asks its registration what it can do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wmrl_autoresearch.environment import AutoResearchEnvironment
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool
from wmrl_autoresearch.sandbox.registry import SandboxTable, UnknownSandboxError, sandbox_table

from wmrl_core import hookimpl
from wmrl_core.errors import ContractError, WMRLError
from wmrl_core.plugins import get_plugin_manager

HERE = Path(__file__).resolve().parent
WRITES_PREDICTIONS = (
    "import csv, os\n"
    "rows = list(csv.DictReader(open(os.path.join(os.environ['DATA_DIR'], 'test.csv'))))\n"
    "with open(os.path.join(os.environ['OUTPUT_DIR'], 'predictions.csv'), 'w') as f:\n"
    "    f.write('prediction\\n' + '1\\n' * len(rows))\n"
    "print('rows', len(rows))\n"
)


@pytest.fixture
def fake_remote(tmp_path, monkeypatch):
    """The test package, installed as a distribution whose entry point names its plugin module."""
    site = tmp_path / "site"
    dist = site / "wmrl_fake_remote_sandbox-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wmrl-fake-remote-sandbox\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[wmrl]\nfake_remote = sandbox_plugin.fake_remote\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(HERE))  # where the package's modules are
    from sandbox_plugin import fake_remote

    fake_remote.SERVICE.runs.clear()
    return fake_remote


def test_ar_a_plugins_sandbox_backend_is_registered_with_what_it_can_do(fake_remote):
    table = sandbox_table()
    assert table.names() == ["docker", "fake-remote", "local-unsafe"]
    spec = table.get("fake-remote")
    assert (spec.plugin, spec.isolated, spec.charges, spec.image, spec.warm_starts, spec.uses_gpus) == (
        "fake_remote",
        False,
        "wall_s",
        None,
        False,
        False,
    )
    docker = table.get("docker")
    assert docker.isolated and docker.warm_starts and docker.uses_gpus and docker.image
    with pytest.raises(UnknownSandboxError) as err:
        AutoResearchEnvironment(sandbox="fake-remot", task_sets=[])
    assert "Did you mean `fake-remote`?" in str(err.value) and "fake-remote (from fake_remote; NOT isolated" in str(
        err.value
    )


def test_ar_a_plugins_sandbox_backend_executes_and_is_charged_as_declared(fake_remote, tiny_classification):
    env = AutoResearchEnvironment(sandbox="fake-remote", task_sets=[], max_parallel=2, limits={"timeout_s": 30})
    try:
        outcomes = env.execute([tiny_classification] * 2, [WRITES_PREDICTIONS, "import sys; sys.exit(3)"])
    finally:
        env.close()
    ok, crashed = outcomes
    assert (ok.status, crashed.status) == ("ok", "crashed") and crashed.info["exit_code"] == 3
    assert ok.info["backend"] == "fake-remote" and f"rows {tiny_classification.n_test}" in ok.info["logs"]["stdout"]
    assert "cpu_s" not in ok.info["resources"] and ok.info["cost_s"] == round(ok.info["runtime_s"], 4) > 0
    # everything the script saw went over the wire: the visible files and the script, not the targets
    assert len(fake_remote.SERVICE.runs) == 2 and {"train.csv", "test.csv"} <= set(fake_remote.SERVICE.runs[0]["files"])
    assert not fake_remote.SERVICE.sandboxes  # every sandbox the pool started was removed


def test_ar_the_pool_asks_the_registration_not_the_name(fake_remote, tiny_classification, small_limits, tmp_path):
    with SandboxPool("fake-remote", limits=small_limits, warm=2, gpus=["0", "1"], workdir=tmp_path) as pool:
        assert (pool.warm_target, pool.gpu_pool.enabled, pool.image) == (0, False, None)  # none of them apply
        fake_remote.SERVICE.down = True
        try:
            failed = pool.run(RunRequest(tiny_classification, "print(1)"))
        finally:
            fake_remote.SERVICE.down = False
        assert failed.sandbox_error and "503" in failed.sandbox_error and not failed.script_started
        assert failed.attempts == 2  # the script never ran, so the pool tried a new sandbox once
        assert pool.run(RunRequest(tiny_classification, WRITES_PREDICTIONS)).predictions.startswith(b"prediction\n")


def test_ar_sandbox_registrations_are_checked():
    class Twice:
        @hookimpl
        def wmrl_register_sandboxes(self, table):
            table.add("docker", "somewhere:Else", isolated=True)

    with pytest.raises(WMRLError, match=r"sandbox backend `docker` is registered twice \(by Twice and autoresearch\)"):
        sandbox_table(get_plugin_manager(extra_plugins=[Twice()]))
    with pytest.raises(WMRLError, match="charges='cpu'; use one of cpu_s, wall_s"):
        SandboxTable().add("cpu", "somewhere:Else", isolated=True, charges="cpu")

    class Hollow:  # its factory makes something that is no SandboxProvider
        @hookimpl
        def wmrl_register_sandboxes(self, table):
            table.add("hollow", lambda settings: object(), isolated=True)

    with pytest.raises(ContractError, match="lacks sandbox, answers, recover, close of"):
        SandboxPool("hollow", sandboxes=sandbox_table(get_plugin_manager(extra_plugins=[Hollow()])))


@pytest.mark.slow
def test_ar_wmrl_trains_through_a_plugins_sandbox_backend(fake_remote, tmp_path):
    from wmrl_core.config import load_config
    from wmrl_core.trainer import train

    run_dir = tmp_path / "run"
    environment = {"sandbox": "fake-remote", "task_sets": ["autoresearch-builtin"], "limits": {"timeout_s": 60}}
    overrides = ["mode=real", "steps=1", f"run_dir={run_dir}", "eval.every=0", "checkpoint.every=0"]
    overrides += ["policy.name=program-policy", "rollout.batch_tasks=1", "rollout.group_size=2"]
    overrides += ["logging.progress=false", "logging.tensorboard=false"]
    cfg = load_config(None, overrides, base={"environment": {"name": "autoresearch", "kwargs": environment}})
    train(cfg)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1] and records[-1]["compute/execution_items"] == 2
    assert len(fake_remote.SERVICE.runs) == 2  # both rollouts executed by the plugin's backend
