"""Sandbox hardening, each property checked against a real container.

One probe script reports what it can see and do from inside the sandbox; every test asserts
one property. The container's configuration is also checked from outside (``inspect``).
"""

from __future__ import annotations

import json
import os

import pytest
from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE, SANDBOX_UID
from wmrl_autoresearch.sandbox.pool import RunRequest

HOST_PATH = os.path.dirname(os.path.abspath(__file__))

PROBE = r"""
import errno, json, os, resource, socket
facts = {}
facts["uid"], facts["gid"] = os.getuid(), os.getgid()
status = open("/proc/self/status").read().splitlines()
for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs"):
    facts[key] = [line.split()[1] for line in status if line.startswith(key + ":")][0]

def try_write(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        os.remove(path)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def read(path):
    try:
        return open(path).read().strip()
    except OSError:
        return None

for name, path in {"root": "/evil", "usr": "/usr/lib/evil", "etc": "/etc/evil", "data": "/data/evil",
                   "code": "/code/evil", "tmp": "/tmp/ok", "output": "/output/ok", "shm": "/dev/shm/ok"}.items():
    facts["write_" + name] = try_write(path)
for name in ("/tmp", "/output", "/dev/shm"):
    s = os.statvfs(name)
    facts["size " + name] = s.f_blocks * s.f_frsize
facts["ifaces"] = sorted(os.listdir("/sys/class/net"))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    facts["tcp"] = "connected"
except OSError as e:
    facts["tcp"] = errno.errorcode.get(e.errno, str(e))
try:
    socket.getaddrinfo("pypi.org", 443)
    facts["dns"] = "resolved"
except OSError:
    facts["dns"] = "failed"
facts["mem_limit"] = read("/sys/fs/cgroup/memory/memory.limit_in_bytes") or read("/sys/fs/cgroup/memory.max")
facts["memsw_limit"] = read("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes") or read("/sys/fs/cgroup/memory.swap.max")
facts["pids_max"] = read("/sys/fs/cgroup/pids/pids.max") or read("/sys/fs/cgroup/pids.max")
quota, period = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
facts["cpu_max"] = f"{quota} {period}" if quota else read("/sys/fs/cgroup/cpu.max")
facts["rlimit_core"] = list(resource.getrlimit(resource.RLIMIT_CORE))
facts["data_files"] = sorted(os.listdir("/data"))
facts["test_header"] = open("/data/test.csv").readline().strip()
facts["task_json_keys"] = sorted(json.load(open("/data/task.json")))
facts["docker_sock"] = os.path.exists("/var/run/docker.sock")
facts["host_path_visible"] = os.path.exists(HOST_PATH)
facts["shadow"] = "readable" if read("/etc/shadow") is not None else "denied"
try:
    os.setuid(0)
    facts["setuid0"] = "ok"
except OSError as e:
    facts["setuid0"] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(facts))
""".replace("HOST_PATH", repr(HOST_PATH))


@pytest.fixture(scope="module")
def facts(pool, tiny_classification):
    execution = pool.run(RunRequest(tiny_classification, PROBE))
    assert execution.exit_code == 0, execution.stderr
    return json.loads(execution.stdout)


def test_ar_runs_as_non_root_user(facts):
    assert (facts["uid"], facts["gid"]) == (SANDBOX_UID, SANDBOX_UID)
    assert facts["setuid0"] == "EPERM"
    assert facts["shadow"] == "denied"


def test_ar_all_capabilities_dropped(facts):
    for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(facts[key], 16) == 0, (key, facts[key])


def test_ar_no_new_privileges(facts):
    assert facts["NoNewPrivs"] == "1"


def test_ar_no_network(facts):
    assert facts["ifaces"] == ["lo"]
    assert facts["tcp"] in {"ENETUNREACH", "EHOSTUNREACH", "ECONNREFUSED"}
    assert facts["dns"] == "failed"


def test_ar_read_only_root_and_mounts(facts):
    for name in ("root", "usr", "etc"):
        assert facts[f"write_{name}"] == "EROFS", name
    assert facts["write_data"] in {"EROFS", "EACCES"}
    assert facts["write_code"] in {"EROFS", "EACCES"}
    assert facts["write_tmp"] == "ok" and facts["write_output"] == "ok"


def test_ar_writable_dirs_are_size_capped_tmpfs(facts, small_limits):
    assert facts["size /tmp"] == small_limits.tmp_mb << 20
    assert facts["size /output"] == small_limits.output_mb << 20
    assert facts["size /dev/shm"] == small_limits.shm_mb << 20


def test_ar_memory_pids_cpu_limits(facts, small_limits):
    assert int(facts["mem_limit"]) == small_limits.memory_mb << 20
    if facts["memsw_limit"] is not None:  # absent when the kernel has no swap accounting
        assert int(facts["memsw_limit"]) in {small_limits.memory_mb << 20, 0}
    assert int(facts["pids_max"]) == small_limits.pids
    quota, period = (int(v) for v in facts["cpu_max"].split())
    assert quota / period == pytest.approx(small_limits.cpus)
    assert facts["rlimit_core"] == [0, 0]


def test_ar_test_labels_and_host_files_not_visible(facts):
    assert facts["data_files"] == ["task.json", "test.csv", "train.csv"]
    assert "target" not in facts["test_header"].split(",")
    assert facts["test_header"].startswith("id,")
    assert "y_test" not in facts["task_json_keys"]
    assert facts["docker_sock"] is False
    assert facts["host_path_visible"] is False


def test_ar_container_configuration_from_outside(docker_client, pool, small_limits):
    """The engine's own record of a sandbox container matches the hardening."""
    from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox

    sandbox = DockerSandbox(docker_client, SANDBOX_IMAGE, small_limits, pool.workspace.new_slot(), lifetime_s=60)
    sandbox.start()
    try:
        host = docker_client.api.inspect_container(sandbox.container.id)["HostConfig"]
        config = docker_client.api.inspect_container(sandbox.container.id)["Config"]
    finally:
        sandbox.remove()
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] == small_limits.memory_mb << 20
    assert host["PidsLimit"] == small_limits.pids
    assert host["NanoCpus"] == int(small_limits.cpus * 1e9)
    assert host["Privileged"] is False and host["Init"] is True and host["AutoRemove"] is True
    assert config["User"] == f"{SANDBOX_UID}:{SANDBOX_UID}"
    assert not host.get("DeviceRequests")  # CPU-only pool: no GPUs requested
    assert docker_client.containers.list(all=True, ignore_removed=True, filters={"name": sandbox.name}) == []
