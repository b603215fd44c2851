"""Running one solution script: what a sandbox backend is (:mod:`.backend`) and the registered
backends by name (:mod:`.registry`); the hardened Docker sandbox (:mod:`.docker_sandbox`, its
backend :mod:`.docker_backend`), the unisolated local fallback (:mod:`.local_sandbox`), the pool
that schedules runs over them (:mod:`.pool`), their limits (:mod:`.limits`), host directories
(:mod:`.workspace`), the record of a run (:mod:`.result`), CPU-time measurement and verdicts
(:mod:`.cpu_meter`), the pre-importing runner (:mod:`.runner`), one captured ``docker exec``
(:mod:`.exec_process`), GPU assignment (:mod:`.gpus`), orphan sweeping (:mod:`.orphans`), the
Docker client (:mod:`.docker_client`) and the sandbox image (:mod:`.image`).

Import from the submodules; this package imports nothing, so that ``import
wmrl_autoresearch.sandbox.limits`` does not pull in the Docker SDK.
"""
