"""Model and device catalogs: the architectures and GPUs a scenario can name by id."""

from sim_core.catalog.devices import DEVICES, DeviceSpec
from sim_core.catalog.hf_import import load_hf_config, model_from_hf_config, parse_hf_config
from sim_core.catalog.models import MODELS, ModelSpec

__all__ = ["DEVICES", "MODELS", "DeviceSpec", "ModelSpec", "load_hf_config", "model_from_hf_config",
           "parse_hf_config"]
