"""Transformer architectures by catalog id.

Figures are the public `config.json` values of each model on the Hugging Face hub
(hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
intermediate_size, vocab_size, max_position_embeddings, num_local_experts,
num_experts_per_tok, tie_word_embeddings).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim_core.catalog.precision import WeightDtype


class ModelSpec(BaseModel):
    """The shape of a decoder-only transformer, enough to price and size it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Human-readable name, e.g. 'Llama-2-7B'.")
    num_layers: int = Field(ge=1, le=1000, description="Number of transformer blocks.")
    num_q_heads: int = Field(ge=1, le=1024, description="Attention query heads.")
    num_kv_heads: int = Field(ge=1, le=1024, description="Key/value heads (< q heads for GQA/MQA).")
    embedding_dim: int = Field(ge=1, le=1_000_000, description="Hidden size (d_model).")
    head_dim: int = Field(ge=1, le=100_000, description=(
        "Dimension of one attention head (default: embedding_dim // num_q_heads, Llama's rule; "
        "Mistral-Nemo and Qwen3, for example, set it apart: q_heads x head_dim need not equal "
        "the hidden size)."))
    mlp_hidden_dim: int = Field(ge=1, le=10_000_000, description="MLP intermediate size (per expert for MoE).")
    use_gated_mlp: bool = Field(default=True, description="SwiGLU-style gated MLP (3 matrices) instead of 2.")
    vocab_size: int = Field(ge=1, le=10_000_000, description="Vocabulary size (embedding and LM head rows).")
    max_position_embeddings: int = Field(default=4096, ge=1, description="Longest context the model supports.")
    tie_word_embeddings: bool = Field(default=False, description="LM head shares the embedding matrix.")
    num_experts: int = Field(default=1, ge=1, le=4096, description="MoE experts per layer (1 = dense).")
    num_experts_per_token: int = Field(default=1, ge=1, le=4096, description="MoE top-k routing.")
    weight_dtype: WeightDtype = Field(default="bf16", description=(
        "Format of the linear layers' weights (bf16/fp16 as trained; fp8 or fp4 when quantized)."))

    @model_validator(mode="before")
    @classmethod
    def _derive_head_dim(cls, data: Any) -> Any:
        """Without a head_dim, each of the query heads gets an equal share of the hidden size."""
        if not isinstance(data, dict) or data.get("head_dim") is not None:
            return data
        hidden, heads = data.get("embedding_dim"), data.get("num_q_heads")
        if not isinstance(hidden, int) or not isinstance(heads, int) or isinstance(hidden, bool) or heads < 1:
            return data                      # the fields' own validation names what is wrong
        if hidden % heads:
            raise ValueError("embedding_dim must be a multiple of num_q_heads (or give head_dim)")
        return {**data, "head_dim": hidden // heads}

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError("num_q_heads must be a multiple of num_kv_heads")
        if self.num_experts_per_token > self.num_experts:
            raise ValueError("num_experts_per_token cannot exceed num_experts")
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1


def _llama(name: str, layers: int, heads: int, kv: int, dim: int, ffn: int, vocab: int = 32000, max_pos: int = 4096,
           **extra: Any) -> ModelSpec:
    return ModelSpec(name=name, num_layers=layers, num_q_heads=heads, num_kv_heads=kv,
                     embedding_dim=dim, mlp_hidden_dim=ffn, vocab_size=vocab,
                     max_position_embeddings=max_pos, **extra)


MODELS: dict[str, ModelSpec] = {
    "llama-2-7b": _llama("Llama-2-7B", 32, 32, 32, 4096, 11008),
    "llama-2-13b": _llama("Llama-2-13B", 40, 40, 40, 5120, 13824),
    "llama-2-70b": _llama("Llama-2-70B", 80, 64, 8, 8192, 28672),
    "llama-3-8b": _llama("Llama-3-8B", 32, 32, 8, 4096, 14336, vocab=128256, max_pos=8192),
    "llama-3-70b": _llama("Llama-3-70B", 80, 64, 8, 8192, 28672, vocab=128256, max_pos=8192),
    "mistral-7b": _llama("Mistral-7B-v0.1", 32, 32, 8, 4096, 14336, max_pos=32768),
    "codellama-34b": _llama("CodeLlama-34B", 48, 64, 8, 8192, 22016, max_pos=16384),
    "qwen2.5-7b": _llama("Qwen2.5-7B", 28, 28, 4, 3584, 18944, vocab=152064, max_pos=32768),
    "qwen2.5-72b": _llama("Qwen2.5-72B", 80, 64, 8, 8192, 29568, vocab=152064, max_pos=32768),
    "phi-2": _llama("Phi-2", 32, 32, 32, 2560, 10240, vocab=51200, max_pos=2048, use_gated_mlp=False),
    "mixtral-8x7b": _llama("Mixtral-8x7B", 32, 32, 8, 4096, 14336, max_pos=32768,
                           num_experts=8, num_experts_per_token=2),
}
