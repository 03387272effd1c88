"""Model catalog: the architecture numbers the training (6·N·D) and decode/KV-cache formulas need.

Training work uses the *active* parameters per token (N_active = N for dense models; MoE: the
routed experts actually used, facts §13); serving streams *all* weights (N) from HBM every decode
step and keeps 2 · layers · KV heads · head dim elements of KV cache per token.

Sources (facts §13): gpt-oss model card via NVIDIA NeMo Megatron-Bridge docs "GPT OSS" and NeMo
Microservices "GPT-OSS Models"; Llama 3 paper (Meta, 2024), model table. A model's ``mfu`` is the
chips' compute efficiency on its kernels (the share of the BF16 peak its GEMMs and other kernels
reach); the job's MFU is what its parallelism plan leaves of it after attention, recomputation,
pipeline bubbles and exposed communication (``twin.work.fabric``). Scenario files may add their own
models (``[[models]]``); this module is data only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Compute efficiency of dense training kernels: end-to-end MFUs that include bubbles and
# communication reach 55.2 % (3P: MegaScale, 175B on 12,288 GPUs) and 56.3 % (3P: Megatron-LM 1T
# benchmark, NVIDIA README), facts §9.5; the kernels alone do at least that. DER: with it the plan
# gives Llama 3 405B 39 % MFU on 16,384 H100 (published 38-43 %, 3P).
DENSE_MFU = 0.55
# MoE: expert GEMMs are smaller and unevenly loaded (ASM 0.50); its all-to-alls are in the plan.
# DER: gpt-oss-120b on one Trn3 UltraServer at MXFP8 then runs at ~0.28 MFU (facts §9.5: MoE
# pre-training 0.25-0.35).
MOE_MFU = 0.50


@dataclass(frozen=True)
class ModelSpec:
    key: str
    params: float  # total parameters N [-] (all weights, streamed per decode step)
    active_params: float  # parameters active per token [-] (= params for dense); 6·N_active·D
    layers: int
    kv_heads: int  # key/value heads (GQA)
    head_dim: int
    hidden: int = 0  # model width [-] (0 = not given)
    experts: int = 0  # routed experts (0 = dense)
    experts_active: int = 0  # experts used per token
    mfu: float = DENSE_MFU  # compute efficiency of its kernels (share of the BF16 peak) [-]
    source: str = ""

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def kv_bytes_per_token(self, bytes_per_elem: float) -> float:
        """KV-cache bytes per token = 2 · layers · KV heads · head dim · bytes (facts §13)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * bytes_per_elem


_GPT_OSS = "gpt-oss model card (NVIDIA NeMo Megatron-Bridge docs 'GPT OSS'; facts §13)"
_LLAMA = "Llama 3 paper (Meta, 2024), model table (facts §13)"

MODELS: dict[str, ModelSpec] = {
    m.key: m
    for m in [
        # MoE: 117 B total / 5.1 B active, 36 layers, width 2,880, 64 query / 8 KV heads of 64,
        # 128 routed experts top-4 (OFF-2 via NVIDIA docs).
        ModelSpec("gpt-oss-120b", 117e9, 5.1e9, 36, 8, 64, 2880, 128, 4, MOE_MFU, _GPT_OSS),
        # MoE: 21 B total / 3.6 B active, 24 layers, 32 routed experts top-4.
        ModelSpec("gpt-oss-20b", 21e9, 3.6e9, 24, 8, 64, 2880, 32, 4, MOE_MFU, _GPT_OSS),
        ModelSpec("llama-3.1-8b", 8e9, 8e9, 32, 8, 128, 4096, 0, 0, DENSE_MFU, _LLAMA),
        ModelSpec("llama-3.1-70b", 70e9, 70e9, 80, 8, 128, 8192, 0, 0, DENSE_MFU, _LLAMA),
        # 405 B dense, 126 layers, width 16,384, 128 query / 8 KV heads of 128; trained on 15.6 T
        # tokens = 3.8e25 FLOP (3P).
        ModelSpec("llama-3.1-405b", 405e9, 405e9, 126, 8, 128, 16384, 0, 0, DENSE_MFU, _LLAMA),
    ]
}


def registry(extra: Iterable[ModelSpec] = ()) -> dict[str, ModelSpec]:
    """The catalog plus scenario-defined models (which may replace a catalogued name)."""
    out = dict(MODELS)
    out.update({m.key: m for m in extra})
    return out
