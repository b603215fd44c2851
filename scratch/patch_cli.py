"""cli.py: `tasks` shows source and licence; new `build-pool` command."""
import sys
path = sys.argv[1]
s = open(path).read()
def rep(a, b):
    global s
    assert s.count(a) == 1, a[:80]
    s = s.replace(a, b)
rep('''    wmrl-autoresearch run-solution TASK SCRIPT.py''', '''    wmrl-autoresearch build-pool [--output PATH]   # vet the packaged datasets, write the pool manifest
    wmrl-autoresearch run-solution TASK SCRIPT.py''')
rep('''        print(json.dumps([{**t.data.public_metadata(), "split": t.data.split, "source": t.data.source}
                          for t in tasks], indent=2))
        return 0
    print(f"{'id':28} {'split':8} {'kind':15} {'metric':18} {'train':>6} {'test':>6} {'feat':>5}")
    for t in tasks:
        d = t.data
        print(f"{d.id:28} {d.split:8} {d.kind:15} {d.metric:18} {d.n_train:6d} {d.n_test:6d} {d.n_features:5d}")
    return 0''', '''        print(json.dumps([{**t.data.public_metadata(), "split": t.data.split, "source": t.data.source,
                           "licence": t.data.licence} for t in tasks], indent=2))
        return 0
    print(f"{'id':34} {'split':8} {'kind':15} {'metric':18} {'train':>6} {'test':>6} {'feat':>5}  source; licence")
    for t in tasks:
        d = t.data
        print(f"{d.id:34} {d.split:8} {d.kind:15} {d.metric:18} {d.n_train:6d} {d.n_test:6d} {d.n_features:5d}  "
              f"{d.source}; {d.licence or 'not recorded'}")
    return 0


def _cmd_build_pool(args) -> int:
    from collections import Counter

    from wmrl_autoresearch.tasks.dataset_pool import MANIFEST_PATH
    from wmrl_autoresearch.vetting.build import build_pool, write_manifest

    doc = build_pool(progress=print if args.verbose else None)
    path = write_manifest(doc, args.output or MANIFEST_PATH)
    counts = Counter((e["recipe"]["source"], e["card"]["split"]) for e in doc["tasks"])
    print(f"wrote {path}: {len(doc['tasks'])} tasks, {len(doc['rejected'])} datasets rejected")
    for (source, split), n in sorted(counts.items()):
        print(f"  {source:16} {split:8} {n:4d}")
    return 0''')
rep('''    r = sub.add_parser("run-solution",''', '''    v = sub.add_parser("build-pool", help="vet every packaged dataset and write the task pool manifest (minutes)")
    v.add_argument("--output", help="manifest path (default: the package's tasks/data/pool.json)")
    v.set_defaults(fn=_cmd_build_pool)

    r = sub.add_parser("run-solution",''')
open(path, 'w').write(s)
print("patched", path)
