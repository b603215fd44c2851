"""Running one solution script: the hardened Docker sandbox (:mod:`.docker_sandbox`), the
unisolated local fallback (:mod:`.local_sandbox`), the pool that schedules runs over them
(:mod:`.pool`), their limits (:mod:`.limits`), host directories (:mod:`.workspace`), the record
of a run (:mod:`.result`), GPU assignment (:mod:`.gpus`), orphan sweeping (:mod:`.orphans`),
the Docker client (:mod:`.docker_client`) and the sandbox image (:mod:`.image`).

Import from the submodules; this package imports nothing, so that ``import
wmrl_autoresearch.sandbox.limits`` does not pull in the Docker SDK.
"""
