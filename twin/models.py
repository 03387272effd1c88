"""Model catalog: the architecture numbers the training (6·N·D) and decode/KV-cache formulas need.

Sources (facts §13): gpt-oss model card via NVIDIA NeMo docs; Llama 3 paper (Meta, 2024).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    key: str
    params: float  # total parameters [-]
    active_params: float  # parameters active per token [-] (= params for dense)
    layers: int
    kv_heads: int
    head_dim: int
    source: str


MODELS: dict[str, ModelSpec] = {
    m.key: m
    for m in [
        ModelSpec("gpt-oss-120b", 117e9, 5.1e9, 36, 8, 64, "gpt-oss model card (NVIDIA NeMo docs)"),
        ModelSpec("gpt-oss-20b", 21e9, 3.6e9, 24, 8, 64, "gpt-oss model card (NVIDIA NeMo docs)"),
        ModelSpec("llama-3.1-8b", 8e9, 8e9, 32, 8, 128, "Llama 3 paper (Meta, 2024), model table"),
        ModelSpec("llama-3.1-70b", 70e9, 70e9, 80, 8, 128, "Llama 3 paper (Meta, 2024), model table"),
        ModelSpec("llama-3.1-405b", 405e9, 405e9, 126, 8, 128, "Llama 3 paper (Meta, 2024), model table"),
    ]
}
