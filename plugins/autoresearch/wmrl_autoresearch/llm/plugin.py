"""WMRL plugin module of the AutoResearch language-model components.

Entry point (in the AutoResearch package's pyproject)::

    [project.entry-points.wmrl]
    autoresearch_llm = "wmrl_autoresearch.llm.plugin"

Both factories are imported lazily (only when a config names them), so listing plugins
does not import torch models, transformers or vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import wmrl_core

if TYPE_CHECKING:
    from wmrl_core.registry import ComponentTable


@wmrl_core.hookimpl
def wmrl_register_policies(table: ComponentTable) -> None:
    table.add(
        "llm-code-agent",
        "wmrl_autoresearch.llm.policy:LLMCodeAgent",
        description="Hugging Face causal LM that answers a task with a ```python script (transformers or vLLM, optional LoRA)",
    )


@wmrl_core.hookimpl
def wmrl_register_world_models(table: ComponentTable) -> None:
    table.add(
        "llm-world-model",
        "wmrl_autoresearch.llm.world_model:LLMWorldModel",
        description="Language model that reads a task and a script and predicts its status and score (batched, greedy)",
    )
