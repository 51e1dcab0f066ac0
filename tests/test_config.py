"""Scenario files: YAML/JSON in, every knob described, clear errors naming field and range."""

import json

import pytest

from sim_core import ConfigError, load_config, parse_config
from sim_core.config import SimulationConfig, config_to_yaml
from sim_core.config.choices import section_fields

CONTRACT = """
seed: 42
model: llama-2-7b
device: a100-80gb
max_model_len: 2048
cluster:
  num_replicas: 1
  tensor_parallel_size: 1
  pipeline_parallel_size: 1
  global_scheduler: round_robin
scheduler:
  type: vllm
  batch_size_cap: 128
  block_size: 16
  num_blocks: 512
  watermark_blocks_fraction: 0.01
  max_tokens_in_batch: 4096
  chunk_size: 512         # knobs of other policies at their defaults (older files hold every knob)
  max_waiting_iters: 10
predictor:
  type: linear
  base_s: 0.005
  per_token_s: 0.0001
workload:
  trace_file: traces/t.csv
"""


def test_the_public_keys_load_from_yaml_and_the_trace_path_is_relative_to_the_file(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "s.yaml").write_text(CONTRACT)
    config = load_config(tmp_path / "s.yaml")
    assert config.scheduler.num_blocks == 512 and config.predictor.type == "linear"
    assert config.workload.trace_file == str((tmp_path / "traces" / "t.csv").resolve())


def test_json_and_yaml_round_trip(tmp_path):
    config = parse_config({"scheduler": {"type": "sarathi", "chunk_size": 128}})
    (tmp_path / "s.json").write_text(json.dumps(config.model_dump(mode="json")))
    (tmp_path / "s.yaml").write_text(config_to_yaml(config))
    assert load_config(tmp_path / "s.json") == config == load_config(tmp_path / "s.yaml")


def test_every_knob_has_a_description():
    def walk(model):
        for name, field in section_fields(model).items():   # the scheduler section: every policy's knobs
            assert field.description, f"{model.__name__}.{name} has no description"
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)
    walk(SimulationConfig)


@pytest.mark.parametrize("data,message", [
    ({"cluster": {"num_replicas": 0}}, "cluster.num_replicas: got 0; allowed range 1 .. 1024"),
    ({"scheduler": {"type": "fifo"}},
     "scheduler.type: got 'fifo'; allowed one of: vllm, sarathi, orca, faster_transformer, lightllm"),
    ({"scheduler": {"watermark_blocks_fraction": 2}},
     "scheduler.watermark_blocks_fraction: got 2; allowed range 0.0 .. 0.9"),
    ({"scheduler": {"chunk": 5}}, "scheduler.chunk: unknown key; known keys: type, batch_size_cap"),
    ({"model": "gpt-5"}, "model: unknown id 'gpt-5'; allowed: codellama-34b"),
    ({"scheduler": {"type": "lightllm"}}, "scheduler.block_size: lightllm needs 1 (got 16)"),
    ({"cluster": {"pipeline_parallel_size": 3}}, "pipeline_parallel_size: 3 must divide the model's 32 layers"),
    ({"predictor": {"type": "linear", "base_s": 0, "per_token_s": 0}}, "cannot both be 0"),
    ({"workload": {"arrival": {"qps": -1}}},
     "workload.arrival.qps: got -1; allowed range 0.0 (exclusive) .. 1000000.0"),
])
def test_invalid_values_name_the_field_the_value_and_the_range(data, message):
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_bad_files_are_reported_in_one_line(tmp_path):
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    (tmp_path / "broken.yaml").write_text("scheduler: [unclosed\n")
    for name, message in (("missing.yaml", "file not found"), ("list.yaml", "top level must be a mapping"),
                          ("broken.yaml", "not valid YAML")):
        with pytest.raises(ConfigError, match=message):
            load_config(tmp_path / name)
