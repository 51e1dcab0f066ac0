"""Where a MoE model's experts and tokens sit under expert and attention-data parallelism.

The arithmetic the predictor (pricing) and the memory planners (weights per GPU) share; see
docs/design/moe-parallelism.md for the model and how it follows vLLM 0.33.

A MoE group is the DP x TP GPUs of one pipeline stage of a replica. Attention (and the dense
layers, the shared expert, embeddings and LM head) runs per DP rank on its TP GPUs. The experts
run over the whole group:

    EP = 1       every expert is split over the group's DP x TP GPUs (vLLM flattens TP across DP)
    EP = DP x TP each GPU holds num_experts / EP whole experts (vLLM's --enable-expert-parallel)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MoeLayout:
    """A replica's parallel layout as the MoE layers see it.

    Attributes:
        tp: tensor-parallel GPUs of one DP rank.
        dp: attention data-parallel ranks (each its own batch and KV cache).
        ep: expert-parallel GPUs: 1 (experts split by TP over the group) or dp x tp.
        all_to_all: tokens reach the experts by an all-to-all of the routed copies (DeepEP-style
            backends) instead of vLLM's default all-gather of every DP rank's hidden states and a
            reduce-scatter back.
    """

    tp: int
    dp: int = 1
    ep: int = 1
    all_to_all: bool = False

    @property
    def trivial(self) -> bool:
        """EP = DP = 1: today's TP-only layout (every formula then takes its pre-EP path)."""
        return self.dp == 1 and self.ep == 1

    @property
    def group(self) -> int:
        """GPUs one MoE layer runs over: DP x TP."""
        return self.dp * self.tp

    @property
    def expert_split(self) -> int:
        """What each expert's intermediate size is divided by on one GPU: 1 under EP (whole
        experts), else the group's DP x TP."""
        return 1 if self.ep > 1 else self.group

    @property
    def exchanges(self) -> bool:
        """Whether a MoE layer moves tokens between GPUs besides TP's all-reduce: DP > 1 (the
        ranks' tokens meet in the experts), or an all-to-all over EP GPUs."""
        return self.dp > 1 or (self.all_to_all and self.ep > 1)


def expert_load_imbalance(tokens: Any, num_experts: int, top_k: int, ep: int) -> Any:
    """Expected max / mean routed (token, expert) pairs over the EP GPUs, for `tokens` tokens each
    routed to `top_k` distinct experts drawn uniformly (numpy arrays too).

    A GPU holds m = E / EP experts; the picks of one token that land on it are hypergeometric
    (mean k m / E, variance k (m/E)(1 - m/E)(E - k)/(E - 1)); over N independent tokens the load
    has mean N k / EP and variance N times that. The expected maximum of EP loads of standard
    deviation s, however correlated, is at most mean + s sqrt(2 ln EP): the factor is that bound
    over the mean, capped by the most a GPU can receive (N min(k, m) pairs). 1 without EP.
    """
    if ep <= 1:
        return 1.0
    m = num_experts / ep
    share = m / num_experts
    var_per_token = top_k * share * (1 - share) * (num_experts - top_k) / max(num_experts - 1, 1)
    n = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    mean = n * top_k / ep
    factor = 1.0 + math.sqrt(2 * math.log(ep)) * np.sqrt(n * var_per_token) / mean
    cap = ep * min(top_k, m) / top_k
    result = np.minimum(factor, cap)
    return float(result) if np.ndim(result) == 0 else result
