"""The reviewed `config.json` keys that change neither a model's shapes nor its memory.

The import reads every key that sizes the model (hf_import.py, hf_layouts.py, hf_quantization.py
list theirs); any other key must be here, or the import stops with an error naming it, so a new
architecture feature is never silently priced as a plain transformer. A key lands here only after
review; the reason is the comment above its group.
"""

from __future__ import annotations

HARMLESS_KEYS: frozenset[str] = frozenset({
    # identity, bookkeeping and tokenizer ids
    "architectures", "model_type", "auto_map", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "cls_token_id", "use_cache", "return_dict",
    "cache_implementation",
    "is_decoder", "for_llm_compressor", "name_or_path",
    # the checkpoint's 16-bit format: weights and activations are 2 bytes whether fp16 or bf16
    "torch_dtype", "dtype",
    # numerics of norms, activations and initialisation
    "hidden_act", "hidden_activation", "activation_function", "rms_norm_eps", "layer_norm_eps",
    "layer_norm_epsilon", "norm_eps", "initializer_range", "initializer_factor",
    # positions: rotary settings change values, not shapes (the context limit is max_position_embeddings)
    "rope_theta", "rope_scaling", "rope_parameters", "rope_type", "partial_rotary_factor", "rotary_pct",
    "rope_local_base_freq", "initial_context_length", "original_max_position_embeddings", "rope_interleave",
    # training-only settings
    "attention_dropout", "hidden_dropout", "dropout", "embd_pdrop", "resid_pdrop", "attn_pdrop",
    "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "output_router_logits", "router_jitter_noise",
    "router_z_loss_coef", "pretraining_tp",
    # routing and attention arithmetic (same shapes): top-k normalisation, scoring, group-limited
    # routing, logit soft-capping, QK norms (a head_dim vector per layer), temperature tuning
    "norm_topk_prob", "scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor",
    "ep_size", "swiglu_limit", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar",
    "use_qk_norm", "attn_temperature_tuning", "floor_scale", "attn_scale", "attention_multiplier",
    # biases: vectors of the projections' output sizes, under 0.1% of the weights (not counted)
    "attention_bias", "mlp_bias", "bias",
    # multi-token-prediction layers: loaded only as a speculative-decoding draft, not for serving
    "num_nextn_predict_layers",
    # multimodal wrappers: token ids of image markers and the image-token budget per image
    "image_token_index", "image_token_id", "boi_token_index", "eoi_token_index", "boi_token_id",
    "eoi_token_id", "mm_tokens_per_image", "vision_feature_layer", "vision_feature_select_strategy",
    "multi_modal_projector_bias", "projector_hidden_act",
})
