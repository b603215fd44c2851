"""The embedded default of the AutoResearch domain: a grammar of ML experiments, a small
autoregressive policy over it, and a learned world model of its outcomes (CPU, no downloads)."""
