"""Apply the task.py changes: licence field, categorical_columns/has_missing properties, meta_features()."""
import sys
path = sys.argv[1]
s = open(path).read()
def rep(a, b):
    global s
    assert s.count(a) == 1, a[:80]
    s = s.replace(a, b)
rep('''    :param source: where the data comes from (one line).
    :param summary: what the data is about (one sentence, shown to the agent).
    """''', '''    :param source: where the data comes from (one line).
    :param summary: what the data is about (one sentence, shown to the agent).
    :param licence: licence of the data (shown by ``wmrl-autoresearch tasks``).
    """''')
rep('''    baseline: float | None = None  # constant-prediction error for rmse/mae (see metrics)
''', '''    baseline: float | None = None  # constant-prediction error for rmse/mae (see metrics)
    licence: str = ""
''')
rep('''    @cached_property
    def fingerprint(self) -> str:''', '''    @property
    def categorical_columns(self) -> list[str]:
        """Feature columns holding strings."""
        return [c for j, c in enumerate(self.columns) if _is_categorical(self.x_train[:, j])]

    @property
    def has_missing(self) -> bool:
        """Whether some training feature cells are empty."""
        return _has_missing(self.x_train)

    def meta_features(self) -> np.ndarray:
        """:func:`task_features` of this task (a deferred task answers from its cached card)."""
        return task_features(self)

    @cached_property
    def fingerprint(self) -> str:''')
rep('''        categorical = [c for c, j in zip(self.columns, range(self.n_features)) if _is_categorical(self.x_train[:, j])]
        extra = f" Categorical (string) columns: {', '.join(categorical)}." if categorical else ""
        missing = " Some cells are empty (missing values)." if _has_missing(self.x_train) else ""''', '''        categorical = self.categorical_columns
        extra = f" Categorical (string) columns: {', '.join(categorical)}." if categorical else ""
        missing = " Some cells are empty (missing values)." if self.has_missing else ""''')
rep('''    return Task(id=task.id, description=task.description(), features=task_features(task), data=task)''',
    '''    return Task(id=task.id, description=task.description(), features=task.meta_features(), data=task)''')
open(path, 'w').write(s)
print("patched", path)
