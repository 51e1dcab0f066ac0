"""Transformer architectures by catalog id.

Figures are the public `config.json` values of each model on the Hugging Face hub
(hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
intermediate_size, vocab_size, max_position_embeddings, num_local_experts,
num_experts_per_tok, tie_word_embeddings, and the local-attention, MoE, MLA and quantization
keys hf_layouts.py and hf_quantization.py read); the repository of each is named beside it.
The catalog entries are what `model_from_hf_config` makes of those files
(tests/test_model_import.py checks each against the shape fields of its config.json).
"""

from __future__ import annotations

from typing import Any, Literal

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
    attention_weight_dtype: WeightDtype | None = Field(default=None, description=(
        "Format of the attention projections when the quantization leaves them out (Llama-4-Scout "
        "FP8 and gpt-oss keep attention in bf16); None: weight_dtype."))
    # ---- local attention (Mistral, Gemma 2/3, gpt-oss: sliding; Llama-4: chunked) ----
    attention_window: int | None = Field(default=None, ge=1, le=100_000_000, description=(
        "Tokens a local-attention layer attends to (None: every layer sees the whole context)."))
    attention_window_kind: Literal["sliding", "chunked"] = Field(default="sliding", description=(
        "sliding: the last `attention_window` tokens; chunked: the tokens of the same "
        "`attention_window`-token chunk (Llama-4)."))
    full_attention_layers: tuple[int, ...] = Field(default=(), max_length=1000, description=(
        "With an attention_window: the layers (0-based) that still attend to the whole context; "
        "the others are local. Empty: every layer is local."))
    # ---- multi-head latent attention (DeepSeek-V2/V3): the KV cache holds one latent per token ----
    kv_lora_rank: int = Field(default=0, ge=0, le=1_000_000, description=(
        "MLA: size of the compressed KV latent cached per token and layer (0: ordinary K/V heads)."))
    qk_rope_head_dim: int = Field(default=0, ge=0, le=100_000, description=(
        "MLA: rotary part of a query/key head, cached beside the latent (shared by all heads)."))
    qk_nope_head_dim: int = Field(default=0, ge=0, le=100_000, description=(
        "MLA: non-rotary part of a query/key head (head_dim = nope + rope)."))
    v_head_dim: int = Field(default=0, ge=0, le=100_000, description="MLA: dimension of a value head.")
    q_lora_rank: int = Field(default=0, ge=0, le=1_000_000, description=(
        "MLA: rank of the low-rank query projection (0: one full query projection)."))
    # ---- mixture of experts beyond uniform layers ----
    shared_expert_dim: int = Field(default=0, ge=0, le=10_000_000, description=(
        "MoE: intermediate size of the shared expert(s) every token passes through, all of them "
        "together (DeepSeek: n_shared_experts x moe_intermediate_size; 0: none)."))
    dense_layers: tuple[int, ...] = Field(default=(), max_length=1000, description=(
        "MoE models: the layers (0-based) whose MLP is dense instead of experts (DeepSeek's first "
        "k layers, Llama-4-Maverick's even ones)."))
    dense_mlp_dim: int | None = Field(default=None, ge=1, le=10_000_000, description=(
        "Intermediate size of the dense layers' MLP in a MoE model (None: mlp_hidden_dim)."))
    encoder_params: int = Field(default=0, ge=0, le=10**13, description=(
        "Parameters of a vision encoder and projector the server loads beside the language model "
        "(16-bit, on the first pipeline stage)."))

    @model_validator(mode="before")
    @classmethod
    def _derive_head_dim(cls, data: Any) -> Any:
        """Without a head_dim, each of the query heads gets an equal share of the hidden size
        (MLA: a query/key head is its non-rotary plus its rotary part)."""
        if not isinstance(data, dict) or data.get("head_dim") is not None:
            return data
        nope, rope = data.get("qk_nope_head_dim"), data.get("qk_rope_head_dim")
        if data.get("kv_lora_rank") and type(nope) is int and type(rope) is int:
            return {**data, "head_dim": nope + rope}
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
        _check_layer_list("full_attention_layers", self.full_attention_layers, self.num_layers)
        _check_layer_list("dense_layers", self.dense_layers, self.num_layers)
        if self.full_attention_layers and self.attention_window is None:
            raise ValueError("full_attention_layers needs an attention_window (the others' window)")
        if (self.dense_layers or self.shared_expert_dim) and not self.is_moe:
            raise ValueError("dense_layers and shared_expert_dim describe MoE models (num_experts > 1)")
        mla = (self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim)
        if self.kv_lora_rank and not all(mla):
            raise ValueError("an MLA model (kv_lora_rank > 0) needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim")
        if not self.kv_lora_rank and (any(mla) or self.q_lora_rank):
            raise ValueError("qk_rope_head_dim, qk_nope_head_dim, v_head_dim and q_lora_rank need kv_lora_rank (MLA)")
        if self.kv_lora_rank and self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
            raise ValueError("an MLA model's head_dim must be qk_nope_head_dim + qk_rope_head_dim")
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: the KV cache holds one latent per token and layer."""
        return self.kv_lora_rank > 0

    def is_local_layer(self, layer: int) -> bool:
        """Whether `layer` attends only within the attention window."""
        return self.attention_window is not None and layer not in self.full_attention_layers

    def is_moe_layer(self, layer: int) -> bool:
        """Whether `layer`'s MLP is the experts (else a dense MLP)."""
        return self.is_moe and layer not in self.dense_layers

    def stage_layers(self, pp: int, stage: int) -> range:
        """The layers pipeline stage `stage` of `pp` holds: num_layers // pp consecutive ones
        (the planners' and predictors' split)."""
        per_stage = self.num_layers // pp
        return range(stage * per_stage, (stage + 1) * per_stage)

    def features_beyond_gqa(self) -> list[str]:
        """The shape features a cost model built for uniform layers of standard (GQA/MQA)
        attention cannot price: what the silicon predictor's kernel tables lack."""
        features = {"MLA attention": self.is_mla, "an attention window": self.attention_window is not None,
                    "shared experts": self.shared_expert_dim > 0,
                    "dense layers between MoE layers": bool(self.dense_layers)}
        return [name for name, present in features.items() if present]


def _check_layer_list(field: str, layers: tuple[int, ...], num_layers: int) -> None:
    if list(layers) != sorted(set(layers)) or (layers and not 0 <= layers[0] <= layers[-1] < num_layers):
        raise ValueError(f"{field} must list distinct layer indices in increasing order, each below num_layers")


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


def _every(start: int, step: int, layers: int) -> tuple[int, ...]:
    """Layers start, start + step, ... below `layers` (the global or dense ones of a pattern)."""
    return tuple(range(start, layers, step))


LLAMA4_VISION_PARAMS = 871_301_632   # hf_import's estimate from Llama-4's vision_config (34 layers, 1408 wide)
GEMMA3_VISION_PARAMS = 422_659_584   # ... and from Gemma-3's SigLIP vision_config (27 layers, 1152 wide)

MODELS.update({
    # meta-llama/Llama-3.1-8B-Instruct, -70B-Instruct, -405B-Instruct, Llama-3.3-70B-Instruct
    "llama-3.1-8b": _llama("Llama-3.1-8B", 32, 32, 8, 4096, 14336, vocab=128256, max_pos=131072),
    "llama-3.1-70b": _llama("Llama-3.1-70B", 80, 64, 8, 8192, 28672, vocab=128256, max_pos=131072),
    "llama-3.1-405b": _llama("Llama-3.1-405B", 126, 128, 8, 16384, 53248, vocab=128256, max_pos=131072),
    "llama-3.3-70b": _llama("Llama-3.3-70B", 80, 64, 8, 8192, 28672, vocab=128256, max_pos=131072),
    # meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config): every layer MoE, 16 experts + a shared
    # one; chunked attention (8192) but on every 4th layer (no_rope_layer_interval 4)
    "llama-4-scout": _llama("Llama-4-Scout-17B-16E", 48, 40, 8, 5120, 8192, vocab=202048, max_pos=10485760,
                            head_dim=128, num_experts=16, num_experts_per_token=1, shared_expert_dim=8192,
                            attention_window=8192, attention_window_kind="chunked",
                            full_attention_layers=_every(3, 4, 48), encoder_params=LLAMA4_VISION_PARAMS),
    # RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic: compressed-tensors FP8 (per-channel) for
    # the MLPs; attention, routers and the LM head left in bf16 (its `ignore` list)
    "llama-4-scout-fp8": _llama("Llama-4-Scout-17B-16E-FP8-dynamic", 48, 40, 8, 5120, 8192, vocab=202048,
                                max_pos=10485760, head_dim=128, num_experts=16, num_experts_per_token=1,
                                shared_expert_dim=8192, attention_window=8192, attention_window_kind="chunked",
                                full_attention_layers=_every(3, 4, 48), encoder_params=LLAMA4_VISION_PARAMS,
                                weight_dtype="fp8", attention_weight_dtype="bf16"),
    # meta-llama/Llama-4-Maverick-17B-128E-Instruct: MoE on odd layers (interleave_moe_layer_step 2),
    # dense layers of intermediate_size_mlp 16384
    "llama-4-maverick": _llama("Llama-4-Maverick-17B-128E", 48, 40, 8, 5120, 8192, vocab=202048, max_pos=1048576,
                               head_dim=128, num_experts=128, num_experts_per_token=1, shared_expert_dim=8192,
                               dense_layers=_every(0, 2, 48), dense_mlp_dim=16384, attention_window=8192,
                               attention_window_kind="chunked", full_attention_layers=_every(3, 4, 48),
                               encoder_params=LLAMA4_VISION_PARAMS),
    # Qwen/Qwen3-8B, -14B, -32B (head_dim 128 set apart from hidden / heads)
    "qwen3-8b": _llama("Qwen3-8B", 36, 32, 8, 4096, 12288, vocab=151936, max_pos=40960, head_dim=128),
    "qwen3-14b": _llama("Qwen3-14B", 40, 40, 8, 5120, 17408, vocab=151936, max_pos=40960, head_dim=128),
    "qwen3-32b": _llama("Qwen3-32B", 64, 64, 8, 5120, 25600, vocab=151936, max_pos=40960, head_dim=128),
    # Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B: every layer MoE (decoder_sparse_step 1), no shared expert
    "qwen3-30b-a3b": _llama("Qwen3-30B-A3B", 48, 32, 4, 2048, 768, vocab=151936, max_pos=40960, head_dim=128,
                            num_experts=128, num_experts_per_token=8),
    "qwen3-235b-a22b": _llama("Qwen3-235B-A22B", 94, 64, 4, 4096, 1536, vocab=151936, max_pos=40960, head_dim=128,
                              num_experts=128, num_experts_per_token=8),
    # deepseek-ai/DeepSeek-V3 and DeepSeek-R1 (the same architecture): MLA, 3 dense layers then MoE
    # with one shared expert, FP8 block-wise (128 x 128) weights as shipped
    **{key: _llama(name, 61, 128, 128, 7168, 2048, vocab=129280, max_pos=163840, head_dim=192,
                   num_experts=256, num_experts_per_token=8, shared_expert_dim=2048, dense_layers=(0, 1, 2),
                   dense_mlp_dim=18432, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                   v_head_dim=128, q_lora_rank=1536, weight_dtype="fp8")
       for key, name in (("deepseek-v3", "DeepSeek-V3"), ("deepseek-r1", "DeepSeek-R1"))},
    # openai/gpt-oss-20b, gpt-oss-120b: sliding window 128 on even layers, MXFP4 experts
    # (attention, router, embeddings and LM head in bf16: modules_to_not_convert)
    "gpt-oss-20b": _llama("gpt-oss-20b", 24, 64, 8, 2880, 2880, vocab=201088, max_pos=131072, head_dim=64,
                          num_experts=32, num_experts_per_token=4, attention_window=128,
                          full_attention_layers=_every(1, 2, 24), weight_dtype="fp4", attention_weight_dtype="bf16"),
    "gpt-oss-120b": _llama("gpt-oss-120b", 36, 64, 8, 2880, 2880, vocab=201088, max_pos=131072, head_dim=64,
                           num_experts=128, num_experts_per_token=4, attention_window=128,
                           full_attention_layers=_every(1, 2, 36), weight_dtype="fp4", attention_weight_dtype="bf16"),
    # google/gemma-3-27b-it (text_config; vocab, context and tied embeddings are Gemma3TextConfig's
    # defaults): sliding window 1024, every 6th layer global
    "gemma-3-27b": _llama("Gemma-3-27B", 62, 32, 16, 5376, 21504, vocab=262208, max_pos=131072, head_dim=128,
                          tie_word_embeddings=True, attention_window=1024, full_attention_layers=_every(5, 6, 62),
                          encoder_params=GEMMA3_VISION_PARAMS),
    # mistralai/Mistral-Small-24B-Instruct-2501, Mixtral-8x22B-v0.1, Mistral-Nemo-Instruct-2407
    "mistral-small-24b": _llama("Mistral-Small-24B", 40, 32, 8, 5120, 32768, vocab=131072, max_pos=32768,
                                head_dim=128),
    "mixtral-8x22b": _llama("Mixtral-8x22B", 56, 48, 8, 6144, 16384, max_pos=65536, num_experts=8,
                            num_experts_per_token=2),
    "mistral-nemo-12b": _llama("Mistral-Nemo-12B", 40, 32, 8, 5120, 14336, vocab=131072, max_pos=131072,
                               head_dim=128),
    # 01-ai/Yi-34B
    "yi-34b": _llama("Yi-34B", 60, 56, 8, 7168, 20480, vocab=64000, max_pos=4096),
})
