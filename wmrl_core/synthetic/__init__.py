"""The synthetic domain: a contextual bandit whose truth is known (a built-in plugin)."""
