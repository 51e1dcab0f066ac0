"""The whole scenario as one pydantic model, with checks that span sections."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints, model_validator

from sim_core.catalog import DEVICES, MODELS, DeviceSpec, ModelSpec
from sim_core.catalog.devices import MEASURED_KERNELS, unmeasured_formats
from sim_core.catalog.moe_layout import MoeLayout
from sim_core.catalog.precision import DTYPE_BYTES, kv_dtype
from sim_core.config.choices import BY_CHOICE
from sim_core.config.coercion import refuse_coercion
from sim_core.config.disaggregation import DisaggregationConfig
from sim_core.config.limits import MIN_DEVICE_RATE, MIN_STAGE_S
from sim_core.config.memory import AutoMemoryConfig, MemoryConfig
from sim_core.config.policies import SchedulerSection, default_scheduler, policy_names, policy_traits
from sim_core.config.predictor import (
    LearnedPredictorConfig,
    LinearPredictorConfig,
    PredictorConfig,
    RooflinePredictorConfig,
)
from sim_core.config.sections import ClusterConfig, EngineConfig, Strict
from sim_core.config.workload import WorkloadConfig
from sim_core.errors import MAX_SHOWN, clipped

MAX_ID_CHARS, MAX_NAME_CHARS = 100, 200     # ids and names are shown in the app: keep them short
CatalogId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
MemorySection = Annotated[MemoryConfig, BY_CHOICE]           # the member its `planner` names
PredictorSection = Annotated[PredictorConfig, BY_CHOICE]     # the member its `type` names


class SimulationConfig(BaseModel):
    """One scenario: model, hardware, cluster, scheduler, cost model and workload."""

    model_config = Strict

    seed: int = Field(42, ge=0, le=2**32 - 1, description="Seeds every random choice of the run.")
    model: str = Field("llama-2-7b", max_length=MAX_ID_CHARS, description="Model catalog id (or a key of `models`).")
    device: str = Field("a100-80gb", max_length=MAX_ID_CHARS, description=(
        "Device catalog id (or a key of `devices`)."))
    max_model_len: int = Field(4096, ge=2, le=10_000_000, description=(
        "Most tokens (prompt + output) one request may hold; longer trace rows have their prompt "
        "clipped as Vidur does (sglang instead cuts the output where a request reaches it). Orca "
        "and FasterTransformer reserve max_model_len // block_size blocks per request."))
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Replicas and parallelism.")
    scheduler: SchedulerSection = Field(default_factory=default_scheduler, description=(
        "Replica scheduler: the policy (`type`) and its knobs."))
    memory: MemorySection = Field(default_factory=AutoMemoryConfig, description="KV-capacity planning.")
    predictor: PredictorSection = Field(default_factory=RooflinePredictorConfig, description="Batch cost model.")
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig, description="Requests to serve.")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="Simulator options.")
    models: dict[CatalogId, ModelSpec] = Field(default_factory=dict, description=(
        "Extra or edited model specs by id; they take precedence over the catalog."))
    devices: dict[CatalogId, DeviceSpec] = Field(default_factory=dict, description=(
        "Extra or edited device specs by id; they take precedence over the catalog."))
    name: str | None = Field(None, max_length=MAX_NAME_CHARS, description="Optional label shown in reports.")
    disaggregation: DisaggregationConfig = Field(default_factory=DisaggregationConfig, description=(
        "Prefill and decode pools joined by KV links (P/D disaggregation)."))

    def model_spec(self) -> ModelSpec:
        return {**MODELS, **self.models}[self.model]

    def device_spec(self) -> DeviceSpec:
        return {**DEVICES, **self.devices}[self.device]

    def kv_cache_dtype(self) -> str:
        """The KV cache's number format after resolving `cluster.kv_cache_dtype: auto`."""
        return kv_dtype(self.cluster.kv_cache_dtype, self.model_spec().weight_dtype)

    def moe_layout(self) -> MoeLayout:
        """The replica's TP, DP and EP as the MoE layers see them (docs/design/moe-parallelism.md)."""
        c = self.cluster
        return MoeLayout(c.tensor_parallel_size, c.data_parallel_size, c.expert_parallel_size,
                         c.all2all_backend == "all_to_all")

    @model_validator(mode="before")
    @classmethod
    def _no_coercion(cls, data: object) -> object:
        refuse_coercion(cls, data)
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_predictor(cls, data: object) -> object:
        """A scenario that names no predictor type is priced by `silicon` on a catalog device with
        measured kernels (MEASURED_KERNELS) in the scenario's weight and KV-cache formats, else by
        the roofline (a device the scenario defines itself under `devices` has no measurements)."""
        if not isinstance(data, dict):
            return data
        predictor = data.get("predictor")
        if predictor is not None and (not isinstance(predictor, dict) or "type" in predictor):
            return data
        device = data.get("device", cls.model_fields["device"].default)
        own = isinstance(data.get("devices"), dict) and device in data["devices"]
        spec = _raw_model_spec(data, cls.model_fields["model"].default)
        measured = device in MEASURED_KERNELS and not own and unmeasured_formats(device, *_formats(data, spec)) is None
        kind = "silicon" if measured and not _silicon_cannot_price(spec) and not _moe_parallel(data) else "roofline"
        return {**data, "predictor": {**(predictor or {}), "type": kind}}

    @model_validator(mode="after")
    def _check_consistency(self) -> SimulationConfig:
        _check_catalog_ids(self)
        _check_devices(self)
        _check_parallelism(self)
        self.scheduler.check_scenario(self)
        _check_disaggregation(self)
        _check_linear_cost(self.predictor)
        if self.predictor.type == "silicon" and (self.device not in MEASURED_KERNELS or self.device in self.devices):
            raise ValueError(f"predictor.type: silicon has measured kernels only for the catalog devices "
                             f"{', '.join(MEASURED_KERNELS)}, not '{clipped(self.device, 60)}'; use roofline")
        gap = unmeasured_formats(self.device, self.model_spec().weight_dtype, self.kv_cache_dtype()) \
            if self.predictor.type == "silicon" else None
        if gap:
            raise ValueError(f"predictor.type: silicon cannot price this scenario: {gap}; use roofline")
        if self.predictor.type == "silicon" and (reason := _silicon_cannot_price(self.model_spec())):
            raise ValueError(f"predictor.type: silicon has kernels only for uniform layers of standard attention; "
                             f"'{clipped(self.model, 60)}' has {reason}; use roofline")
        if self.predictor.type in ("silicon", "learned") and _moe_parallel({"cluster": self.cluster}):
            raise ValueError(f"predictor.type: {self.predictor.type} has no kernels for expert or data parallelism "
                             f"(cluster.expert_parallel_size / data_parallel_size > 1); use roofline")
        if isinstance(self.predictor, LearnedPredictorConfig) and not self.predictor.profiles_dir:
            raise ValueError("predictor.profiles_dir: the learned predictor needs a folder of profiling CSVs")
        return self


def _moe_parallel(data: dict) -> bool:
    """Whether a scenario (validated or not, read leniently) asks for EP or DP > 1: only the
    roofline prices those, so the default predictor is then roofline."""
    cluster = data.get("cluster")
    values = [cluster.get(field) if isinstance(cluster, dict) else getattr(cluster, field, None)
              for field in ("expert_parallel_size", "data_parallel_size")]
    return any(isinstance(value, int) and value > 1 for value in values)


def _formats(data: dict, spec: ModelSpec | None) -> tuple[str, str]:
    """(weight format, KV-cache format) of a scenario not yet validated, read leniently: anything
    malformed counts as 16-bit here and the fields' own validation names it."""
    weight = spec.weight_dtype if spec is not None else "bf16"
    cluster = data.get("cluster")
    requested = cluster.get("kv_cache_dtype") if isinstance(cluster, dict) else getattr(cluster, "kv_cache_dtype", None)
    return weight, kv_dtype(requested if isinstance(requested, str) and requested in DTYPE_BYTES else "auto", weight)


def _raw_model_spec(data: dict, default: str) -> ModelSpec | None:
    """The scenario's model before validation (None when it is not valid yet: validation says why)."""
    model = data.get("model", default)
    own = data.get("models")
    spec = own.get(model) if isinstance(own, dict) and isinstance(model, str) else None
    if spec is None:
        return MODELS.get(model) if isinstance(model, str) else None
    try:
        return spec if isinstance(spec, ModelSpec) else ModelSpec.model_validate(spec)
    except ValueError:
        return None


def _silicon_cannot_price(model: ModelSpec | None) -> str:
    """Why the silicon predictor's tables cannot price `model` ('' when they can)."""
    return " and ".join(model.features_beyond_gqa()) if model is not None else ""


def _check_linear_cost(predictor: PredictorConfig) -> None:
    """The cheapest stage (one token) takes at least MIN_STAGE_S, which the float64 clock still
    resolves at the arrival horizon (a shorter one would not advance simulated time)."""
    if not isinstance(predictor, LinearPredictorConfig):
        return
    cheapest = predictor.base_s + predictor.per_token_s
    if cheapest <= 0:
        raise ValueError("predictor: base_s and per_token_s cannot both be 0 (batches would take no time)")
    if cheapest < MIN_STAGE_S:
        raise ValueError(f"predictor: base_s + per_token_s is {cheapest:.3g} s; a one-token batch must take at "
                         f"least {MIN_STAGE_S:g} s (the simulated clock cannot resolve shorter steps)")


def _check_devices(config: SimulationConfig) -> None:
    """Rates of the scenario's own devices are finite and at least MIN_DEVICE_RATE, so a batch's
    time is a finite number of seconds (the catalog only asks for > 0)."""
    for key, spec in config.devices.items():
        for field in ("bf16_tflops", "fp8_tflops", "fp4_tflops", "memory_bandwidth_gbps", "link_bandwidth_gbps",
                      "pcie_bandwidth_gbps"):
            value = getattr(spec, field)
            if value is not None and not MIN_DEVICE_RATE <= value < math.inf:
                raise ValueError(f"devices.{clipped(key, 60)}.{field}: got {value:g}; allowed a finite value of at "
                                 f"least {MIN_DEVICE_RATE:g}")


def _check_catalog_ids(config: SimulationConfig) -> None:
    models, devices = {**MODELS, **config.models}, {**DEVICES, **config.devices}
    if config.model not in models:
        raise ValueError(f"model: unknown id '{clipped(config.model, 60)}'; allowed: "
                         f"{clipped(', '.join(sorted(models)), MAX_SHOWN)}")
    if config.device not in devices:
        raise ValueError(f"device: unknown id '{clipped(config.device, 60)}'; allowed: "
                         f"{clipped(', '.join(sorted(devices)), MAX_SHOWN)}")


def _check_parallelism(config: SimulationConfig) -> None:
    spec, cluster = config.model_spec(), config.cluster
    if spec.num_layers % cluster.pipeline_parallel_size:
        raise ValueError(f"cluster.pipeline_parallel_size: {cluster.pipeline_parallel_size} must divide "
                         f"the model's {spec.num_layers} layers")
    if spec.num_q_heads % cluster.tensor_parallel_size:
        raise ValueError(f"cluster.tensor_parallel_size: {cluster.tensor_parallel_size} must divide "
                         f"the model's {spec.num_q_heads} query heads")
    _check_moe_parallelism(config)


def _check_moe_parallelism(config: SimulationConfig) -> None:
    """EP and DP apply to MoE models only; EP is 1 or DP x TP (vLLM's only expert-parallel
    layout) and divides the experts; neither is modelled with P/D disaggregation."""
    spec, cluster = config.model_spec(), config.cluster
    dp, ep, tp = cluster.data_parallel_size, cluster.expert_parallel_size, cluster.tensor_parallel_size
    for field, value in (("data_parallel_size", dp), ("expert_parallel_size", ep)):
        if value > 1 and not spec.is_moe:
            raise ValueError(f"cluster.{field}: got {value}; allowed: 1 (model '{config.model}' is dense: "
                             f"expert and attention data parallelism apply to MoE models only)")
        if value > 1 and config.disaggregation.enabled:
            raise ValueError(f"cluster.{field}: got {value}; allowed: 1 with disaggregation.enabled "
                             f"(P/D pools do not model expert or data parallelism)")
    if ep not in (1, dp * tp):
        raise ValueError(f"cluster.expert_parallel_size: got {ep}; allowed: 1 or data_parallel_size x "
                         f"tensor_parallel_size = {dp * tp} (experts split over every GPU of the MoE group)")
    if spec.num_experts % ep:
        raise ValueError(f"cluster.expert_parallel_size: got {ep}; allowed: a divisor of the model's "
                         f"{spec.num_experts} experts")


def _check_disaggregation(config: SimulationConfig) -> None:
    pd = config.disaggregation
    if not pd.enabled:
        return
    if not config.scheduler.traits.supports_disaggregation:
        unsupported = [name for name in policy_names() if not policy_traits(name).supports_disaggregation]
        raise ValueError(f"disaggregation.enabled: scheduler.type {config.scheduler.type} cannot hand requests "
                         f"between pools (not supported: {', '.join(unsupported)})")
    spec = config.model_spec()
    for name, pool in (("prefill", pd.prefill), ("decode", pd.decode)):
        if spec.num_layers % pool.pipeline_parallel_size:
            raise ValueError(f"disaggregation.{name}.pipeline_parallel_size: {pool.pipeline_parallel_size} must "
                             f"divide the model's {spec.num_layers} layers")
        if spec.num_q_heads % pool.tensor_parallel_size:
            raise ValueError(f"disaggregation.{name}.tensor_parallel_size: {pool.tensor_parallel_size} must "
                             f"divide the model's {spec.num_q_heads} query heads")
