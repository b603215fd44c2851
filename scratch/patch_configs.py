"""Pin the shipped AutoResearch configs to the built-in suite (same tasks and cost as before the pool)."""
import sys
from pathlib import Path
root = Path(sys.argv[1])
for path in sorted((root / "configs/autoresearch").rglob("*.yaml")):
    s = path.read_text()
    if "task_sets" in s:
        continue
    if "environment: {name: autoresearch, kwargs: {}}" in s:
        s = s.replace("environment: {name: autoresearch, kwargs: {}}",
                      "environment: {name: autoresearch, kwargs: {task_sets: [autoresearch-builtin]}}  # + autoresearch-pool: the real-data pool")
    elif "  kwargs:\n    sandbox: docker\n" in s:
        s = s.replace("  kwargs:\n    sandbox: docker\n",
                      "  kwargs:\n    sandbox: docker\n    task_sets: [autoresearch-builtin]  # add autoresearch-pool to train on the real-data pool\n", 1)
    else:
        print("not pinned:", path); continue
    path.write_text(s); print("pinned", path)
