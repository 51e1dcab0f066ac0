"""The predictor section (the batch cost model): one config model per `type`, with only the
knobs that cost model reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim_core.config.choices import ChoiceBase, Choices, add_choices
from sim_core.config.sections import Strict

CPU_PHASES = ("schedule", "prepare_inputs", "sample", "process_outputs")  # OperatorModelConfig.cpu_<phase>_s


class PredictorConfig(ChoiceBase):
    """The batch cost model: how long one pipeline stage of a batch takes."""

    model_config = Strict

    # the default when a scenario names none is decided by the device (SimulationConfig._default_predictor)
    type: Literal["linear", "roofline", "learned", "silicon"] = Field("roofline", description=(
        "linear: base_s + per_token_s x tokens (exact, for teaching and Vidur comparisons); "
        "roofline: per-operator FLOPs and bytes against the device's compute and memory roofs; "
        "learned: per-operator models trained on profiling CSVs in Vidur's format (profiles_dir); "
        "silicon: per-operator latencies of vLLM's kernels measured on the device (A100-80GB, "
        "H100, H200, B200, L40S), interpolated to the model's shapes. Default: silicon on those "
        "devices where the model's weight and KV-cache formats were measured, roofline elsewhere."))


class LinearPredictorConfig(PredictorConfig):
    """The knobs the linear model reads."""

    type: Literal["linear"] = "linear"
    base_s: float = Field(0.005, ge=0.0, le=1000.0, description="linear: fixed seconds per stage.")
    per_token_s: float = Field(0.0001, ge=0.0, le=1000.0, description=(
        "linear: seconds per token processed in the iteration (prompt, chunk or decode token)."))


class OperatorModelConfig(PredictorConfig):
    """The knobs of the per-operator models (roofline, and learned, which prices the operators
    its profiles lack by the roofline): the device's achieved fractions and the host's time."""

    compute_efficiency: float | None = Field(None, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of peak tensor FLOP/s in matrix multiplies (default: the "
        "device's own factor from the catalog)."))
    memory_efficiency: float | None = Field(None, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of peak memory bandwidth (default: the device's own factor; on a "
        "device with its own attention factor, attention's KV reads move in proportion)."))
    link_efficiency: float = Field(0.7, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of link bandwidth in all-reduce and send/recv."))
    expert_load_imbalance: float | None = Field(None, ge=1.0, le=4096.0, description=(
        "roofline, MoE with cluster.expert_parallel_size > 1: max / mean routed tokens per GPU, "
        "which sets the experts' step; empty: the bound for uniform top-k routing of the step's "
        "tokens (docs/design/moe-parallelism.md)."))
    cpu_schedule_s: float = Field(0.0005, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration spent in the scheduler (queues, block "
        "tables)."))
    cpu_schedule_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra scheduler seconds per request in the batch."))
    cpu_prepare_inputs_s: float = Field(0.0015, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration building the model inputs (token ids, "
        "positions, attention metadata) and copying them to the GPU."))
    cpu_prepare_inputs_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra input-preparation seconds per request in the batch."))
    cpu_sample_s: float = Field(0.001, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration in sampling (logits processing, sampler "
        "launch and synchronisation)."))
    cpu_sample_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra sampling seconds per request in the batch."))
    cpu_process_outputs_s: float = Field(0.001, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration processing model outputs (appending "
        "tokens, stop checks, detokenisation hand-off)."))
    cpu_process_outputs_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra output-processing seconds per request in the batch."))


class RooflinePredictorConfig(OperatorModelConfig):
    """The knobs the roofline model reads."""

    type: Literal["roofline"] = "roofline"


class LearnedPredictorConfig(OperatorModelConfig):
    """The knobs the learned model reads: its profiles and estimator besides the roofline's."""

    type: Literal["learned"] = "learned"
    profiles_dir: str | None = Field(None, description=(
        "learned: folder in Vidur's layout (compute/<device>/<org>/<model>/{mlp,attention}.csv, "
        "network/<node>/{all_reduce,send_recv}.csv); operators it lacks are priced by the roofline."))
    estimator: Literal["random_forest", "polynomial"] = Field("random_forest", description=(
        "learned: random_forest (accurate inside the profiled range) or polynomial (smooth, "
        "extrapolates further)."))
    cache_dir: str | None = Field(None, description=(
        "learned: folder where trained prediction grids are cached, keyed by a hash of the "
        "profiles and options (no cache when absent)."))


class SiliconPredictorConfig(OperatorModelConfig):
    """The knobs the silicon model reads: GEMMs, attention, MoE and all-reduce come from measured
    tables; the roofline's knobs still price the small element-wise kernels and the host."""

    type: Literal["silicon"] = "silicon"


PREDICTORS = Choices(PredictorConfig, "type", {
    "linear": LinearPredictorConfig, "roofline": RooflinePredictorConfig, "learned": LearnedPredictorConfig,
    "silicon": SiliconPredictorConfig})
add_choices(PREDICTORS)


def as_roofline(predictor: PredictorConfig) -> RooflinePredictorConfig:
    """The roofline model with the knobs it shares with `predictor` (the roofline's defaults for
    the others): what the roofline would price under the scenario's settings."""
    return RooflinePredictorConfig.model_validate(PREDICTORS.switched(predictor.model_dump(), "roofline"))
