"""Strict inputs: every probe that once validated and then crashed (exit 70), was coerced or
took gigabytes now ends with exit 2 and one line naming the file, row, column or field."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import resource
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import pytest
import yaml

from sim_core import ConfigError, SimulationError, parse_config
from sim_core.catalog.hf_import import parse_hf_config
from sim_core.cli.main import main
from sim_core.config.documents import parse_yaml
from sim_core.config.loading import parse_mapping
from sim_core.config.share import decode_scenario, encode_scenario
from sim_core.engine.kernel import EventKernel
from sim_core.errors import shown
from sim_core.sweep.spec import load_sweep_spec

ROOT = Path(__file__).resolve().parents[1]
LINEAR = "predictor: {type: linear}\n"
HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi"))  # 9**9 strings


def cli(*args: object) -> tuple[int, str]:
    """Run the CLI in-process: (exit status, stderr); a warning counts as a line of stderr."""
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(err), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        code = main([str(a) for a in args])
    return code, err.getvalue() + "".join(f"warning: {w.message}\n" for w in caught)


def refused(*args: object) -> str:
    """The one line of a refused command (exit 2), without its 'error: ' prefix."""
    code, err = cli(*args)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.removeprefix("error: ").rstrip("\n")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---- the probes of issue 13 -------------------------------------------------------------------

def test_an_arrival_at_1e15_s_is_refused_at_its_row(tmp_path):
    """A trace row past the 1e9 s horizon stops the read at that row instead of the event queue."""
    write(tmp_path / "t.csv", HEADER + "0,10,10\n1e15,10,10\n")
    scenario = write(tmp_path / "s.yaml", LINEAR + "workload: {trace_file: t.csv}\n")
    assert refused("run", "--config", scenario) == (
        f"{tmp_path / 't.csv'}, row 2 (line 3), column 'arrived_at': arrival time 1e+15 s is past the 1e+09 s "
        "horizon of simulated time")


def test_a_mooncake_timestamp_past_the_horizon_names_both_units(tmp_path):
    """Mooncake times are milliseconds: the message gives the file's value and its seconds."""
    trace = write(tmp_path / "t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
                                         '{"timestamp": 2e12, "input_length": 5, "output_length": 5}\n')
    assert refused("validate", trace) == (
        f"{trace}, row 2 (line 2), column 'timestamp': arrival time 2e+12 ms = 2e+09 s is past the 1e+09 s "
        "horizon of simulated time")


@pytest.mark.parametrize("costs", ["base_s: 1.0e-300, per_token_s: 0.0", "base_s: 0.0, per_token_s: 1.0e-300"])
def test_a_batch_cheaper_than_a_microsecond_is_refused(tmp_path, costs):
    """Tiny linear costs, which the clock could not resolve, are refused with both fields named."""
    scenario = write(tmp_path / "s.yaml", f"predictor: {{type: linear, {costs}}}\nworkload: {{num_requests: 5}}\n")
    assert refused("run", "--config", scenario) == (
        f"{scenario}: predictor: base_s + per_token_s is 1e-300 s; a one-token batch must take at least 1e-06 s "
        "(the simulated clock cannot resolve shorter steps)")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_rate_curve_must_be_finite(tmp_path, value):
    """NaN or infinity inside rate_curve is refused naming its index."""
    scenario = write(tmp_path / "s.yaml", "workload: {num_requests: 5, arrival: {process: diurnal, "
                                          f"rate_curve: [1.0, {value}, 2.0]}}}}\n")
    shown_value = {".nan": "nan", ".inf": "inf", "-.inf": "-inf"}[value]
    assert refused("run", "--config", scenario) == (
        f"{scenario}: workload.arrival.rate_curve.1: got {shown_value}; Input should be a finite number")


@pytest.mark.parametrize("tokens,shown_as", [("1e300", "1e+300"), ("9223372036854775808", "9.223372036854776e+18")])
def test_token_counts_beyond_a_billion_are_refused_at_their_row(tmp_path, tokens, shown_as):
    """1e300 and 2**63 prompt tokens stop at the row instead of wrapping around in int64."""
    write(tmp_path / "t.csv", HEADER + f"0,{tokens},10\n")
    scenario = write(tmp_path / "s.yaml", LINEAR + "workload: {trace_file: t.csv}\n")
    assert refused("run", "--config", scenario) == (
        f"{tmp_path / 't.csv'}, row 1 (line 2), column 'num_prefill_tokens': value {shown_as} is over the limit "
        "of 1000000000 tokens")


@pytest.mark.parametrize("stamp", ["9999-12-31 00:00:00", "9999-12-31T00:00:00Z"])
def test_an_azure_timestamp_in_the_year_9999_is_refused_at_its_row(tmp_path, stamp):
    """Whole-second Azure times parse at a coarser unit; a year past 2262 is named, not an OverflowError."""
    trace = write(tmp_path / "azure.csv", f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,10\n"
                                          f"{stamp},10,10\n")
    assert refused("validate", trace) == (
        f"{trace}, row 2 (line 3), column 'TIMESTAMP': value '{stamp}' is outside the date range a trace may use "
        "(1677-09-22 .. 2262-04-11)")


def test_an_azure_trace_spanning_centuries_is_refused_by_the_horizon(tmp_path):
    """Times in range but 292 years apart pass the horizon counted from the first request."""
    trace = write(tmp_path / "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1970-01-01 00:00:00,10,10\n"
                                          "2262-04-10 00:00:00,10,10\n")
    assert refused("validate", trace) == (
        f"{trace}, row 2 (line 3), column 'TIMESTAMP': arrival time the first request + 9.2232e+09 s is past the "
        "1e+09 s horizon of simulated time")


def test_a_5001_digit_integer_in_mooncake_json_lines_is_refused_at_its_line(tmp_path):
    """An integer Python will not convert is named by line and key instead of a ValueError."""
    trace = write(tmp_path / "t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
                                         f'{{"timestamp": 1, "input_length": {"9" * 5001}, "output_length": 5}}\n')
    assert refused("validate", trace) == (
        f"{trace}, row 2 (line 2), column 'input_length': value is an integer of 5001 digits, too large for a number")


def test_a_400_digit_integer_in_mooncake_json_lines_is_too_large(tmp_path):
    """An integer beyond float64 is refused at its row instead of an OverflowError."""
    trace = write(tmp_path / "t.jsonl", f'{{"timestamp": 0, "input_length": {"9" * 400}, "output_length": 5}}\n')
    assert refused("validate", trace) == (
        f"{trace}, row 1 (line 1), column 'input_length': value 9999999999999999999999999999999999999... is too "
        "large for a number")


def test_deeply_nested_json_lines_are_refused_at_their_line(tmp_path):
    """A line nested 100,000 levels deep is named instead of a RecursionError."""
    trace = write(tmp_path / "t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
                                         f'{{"timestamp": 1, "x": {"[" * 100_000}{"]" * 100_000}}}\n')
    assert refused("validate", trace) == f"{trace}, row 2 (line 2): not valid JSON: nested too deeply"


def test_deeply_nested_yaml_is_refused_at_its_line(tmp_path):
    """YAML nested past 50 levels is refused where the 51st level opens."""
    scenario = write(tmp_path / "s.yaml", "seed: 1\nworkload:\n  x: " + "[" * 5000 + "]" * 5000 + "\n")
    assert refused("run", "--config", scenario) == f"{scenario}: line 3: nested deeper than 50 levels"


def test_deeply_nested_json_is_refused_at_its_line(tmp_path):
    """JSON nested past 50 levels (or past Python's recursion limit) is refused with its line."""
    for depth in (60, 100_000):
        scenario = write(tmp_path / "s.json", '{"seed": 1,\n "workload":\n ' + "[" * depth + "]" * depth + "}\n")
        assert refused("run", "--config", scenario) == f"{scenario}: line 3: nested deeper than 50 levels"


def test_a_boolean_is_not_a_number(tmp_path):
    """`num_replicas: true` is refused instead of becoming 1 replica."""
    scenario = write(tmp_path / "s.yaml", "cluster: {num_replicas: true}\n")
    assert refused("run", "--config", scenario) == (
        f"{scenario}: cluster.num_replicas: got True; allowed range 1 .. 1024; Input should be a valid integer")


def test_a_string_is_not_a_number(tmp_path):
    """`seed: "42"` is refused instead of becoming 42."""
    scenario = write(tmp_path / "s.yaml", 'seed: "42"\n')
    assert refused("run", "--config", scenario) == (
        f"{scenario}: seed: got '42'; allowed range 0 .. 4294967295; Input should be a valid integer")


def test_duplicate_yaml_keys_are_refused_naming_both_lines(tmp_path):
    """A key given twice is an error naming the key and both lines, not a silent override."""
    scenario = write(tmp_path / "s.yaml", "seed: 1\nworkload:\n  num_requests: 5\n  num_requests: 6\n")
    assert refused("run", "--config", scenario) == f"{scenario}: line 4: duplicate key 'num_requests' (first on line 3)"


def test_duplicate_json_keys_are_refused(tmp_path):
    """JSON objects get the same rule (JSON parsers give no line)."""
    scenario = write(tmp_path / "s.json", '{"seed": 1, "seed": 2}')
    assert refused("run", "--config", scenario) == f"{scenario}: duplicate key 'seed' in a JSON object"


def test_a_sweep_spec_gets_the_same_yaml_rules(tmp_path):
    """Sweep specs are read by the same loader: a duplicate key is refused with its line."""
    spec = write(tmp_path / "sweep.yaml", "base: {seed: 1}\nvary: {seed: [1, 2]}\nvary: {seed: [3]}\n")
    with pytest.raises(ConfigError) as error:
        load_sweep_spec(spec)
    assert str(error.value) == f"{spec}: line 3: duplicate key 'vary' (first on line 2)"


def test_a_deeply_nested_model_config_is_refused_in_one_line():
    """An uploaded HF config.json nested past the recursion limit is a ConfigError."""
    with pytest.raises(ConfigError, match=r"^config.json: not valid JSON \(maximum recursion depth exceeded"):
        parse_hf_config("[" * 100_000 + "]" * 100_000)


# ---- YAML aliases ------------------------------------------------------------------------------

def test_the_billion_laughs_document_is_refused_before_it_is_built():
    """The 342-byte alias bomb is refused while composing, in milliseconds."""
    assert len(BILLION_LAUGHS) == 342
    started = time.perf_counter()
    with pytest.raises(ConfigError) as error:
        parse_mapping(BILLION_LAUGHS, "bomb.yaml")
    assert time.perf_counter() - started < 0.5
    assert str(error.value) == ("bomb.yaml: line 7: the document expands to more than 1,000,000 values (every use "
                                "of an alias counts its anchor's values again); refused before building it")


def test_the_billion_laughs_file_fails_fast_within_a_memory_limit(tmp_path):
    """`validate` on the bomb exits 2 in about a second under a 1 GiB address-space limit (it took
    3.1 GB and 44 s)."""
    bomb = write(tmp_path / "bomb.yaml", BILLION_LAUGHS)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sim_core", "validate", str(bomb)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, preexec_fn=limit_memory, env={"OPENBLAS_NUM_THREADS": "1",
                                                                                "PATH": "/usr/bin:/bin"})
    assert time.perf_counter() - started < 20
    assert done.returncode == 2 and done.stderr.startswith(f"error: {bomb}: line 7: the document expands to more "
                                                           "than 1,000,000 values"), done.stderr


def test_error_messages_never_repr_an_expanded_structure():
    """The reported bug: an unknown key holding the bomb's shared lists is described from a
    bounded repr, not `repr()` of 387 million strings."""
    value = ["lol"] * 9
    for _ in range(8):
        value = [value] * 9
    started = time.perf_counter()
    with pytest.raises(ConfigError) as error:
        parse_config({"name": value})
    assert time.perf_counter() - started < 0.5
    assert str(error.value).startswith("scenario: name: got [[[[[...], [...], [...]")
    assert len(str(error.value)) < 200


def test_an_alias_inside_its_own_anchor_is_refused():
    """A recursive structure cannot be built at all."""
    with pytest.raises(ConfigError, match=r"^s.yaml: line 1: an alias refers to a node that contains it"):
        parse_mapping("a: &a [1, *a]\n", "s.yaml")


def test_aliases_and_merge_keys_within_the_limits_still_load():
    """Ordinary anchors, and a merge whose keys the mapping overrides, load as before."""
    text = "base: &b {qps: 1.0, cv: 2.0}\nfirst: *b\nsecond: {<<: *b, cv: 3.0}\n"
    assert parse_mapping(text, "s.yaml") == yaml.safe_load(text) == {
        "base": {"qps": 1.0, "cv": 2.0}, "first": {"qps": 1.0, "cv": 2.0}, "second": {"qps": 1.0, "cv": 3.0}}


def test_a_yaml_integer_of_5001_digits_is_refused_at_its_line(tmp_path):
    """PyYAML's ValueError for an over-long integer becomes a line naming the digits."""
    scenario = write(tmp_path / "s.yaml", f"name: x\nseed: {'9' * 5001}\n")
    assert refused("run", "--config", scenario) == (
        f"{scenario}: line 2: an integer of 5001 digits, too long to be a number")


def test_a_json_integer_of_5001_digits_is_refused_at_its_line(tmp_path):
    """json's ValueError for an over-long integer becomes a line naming the digits."""
    scenario = write(tmp_path / "s.json", f'{{"name": "x",\n "seed": {"9" * 5001}}}')
    assert refused("run", "--config", scenario) == (
        f"{scenario}: line 2: an integer of 5001 digits, too long to be a number")


def test_a_4000_digit_integer_is_echoed_in_60_characters(tmp_path):
    """An integer Python can convert but no field allows is refused with a short echo."""
    scenario = write(tmp_path / "s.yaml", f"seed: {'9' * 4000}\n")
    assert refused("run", "--config", scenario) == f"{scenario}: seed: got {'9' * 57}...; allowed range 0 .. 4294967295"


def test_a_3_mb_model_id_is_refused_and_echoed_in_60_characters(tmp_path):
    """Values that came from the input are cut short in every message; an id has at most 100 characters."""
    scenario = write(tmp_path / "s.yaml", f"model: {'y' * 3_000_000}\n")
    message = refused("run", "--config", scenario)
    assert message == f"{scenario}: model: got '{'y' * 56}...; String should have at most 100 characters"


def test_an_unknown_id_is_echoed_in_60_characters(tmp_path):
    scenario = write(tmp_path / "s.yaml", f"model: {'y' * 99}\n")
    message = refused("run", "--config", scenario)
    assert message.startswith(f"{scenario}: model: unknown id '{'y' * 57}...'; allowed: ") and len(message) < 400


# ---- no silent coercion ------------------------------------------------------------------------

@pytest.mark.parametrize("data,message", [
    ({"workload": {"num_requests": 2.5}}, "workload.num_requests: got 2.5; allowed range 1 .. 100000000; "
                                          "Input should be a valid integer, got a number with a fractional part"),
    ({"disaggregation": {"prefill": {"num_blocks": False}}},
     "disaggregation.prefill.num_blocks: got False; allowed range 1 .. 1000000000; Input should be a valid integer"),
    ({"workload": {"arrival": {"qps": "4"}}}, "workload.arrival.qps: got '4'; allowed range 0.0 (exclusive) .. "
                                              "1000000.0; Input should be a valid number"),
    ({"workload": {"arrival": {"qps": False}}}, "workload.arrival.qps: got False; allowed range 0.0 (exclusive) .. "
                                                "1000000.0; Input should be a valid number"),
    ({"engine": {"fast_forward": "no"}}, "engine.fast_forward: got 'no'; Input should be a valid boolean"),
    ({"engine": {"fast_forward": 0}}, "engine.fast_forward: got 0; Input should be a valid boolean"),
    ({"scheduler": {"cuda_graph_batch_sizes": [1, True]}},
     "scheduler.cuda_graph_batch_sizes.1: got True; Input should be a valid integer"),
    ({"predictor": {"type": "linear", "base_s": float("inf")}}, "predictor.base_s: got inf; allowed range 0.0 .. "
                                                                 "1000.0; Input should be a finite number"),
    ({"models": {"m": {"name": "m", "num_layers": True, "num_q_heads": 1, "num_kv_heads": 1, "embedding_dim": 8,
                       "mlp_hidden_dim": 8, "vocab_size": 8}}},
     "models.m.num_layers: got True; Input should be a valid integer"),
])
def test_values_of_the_wrong_type_are_refused_naming_the_field(data, message):
    """Booleans and strings are not coerced into numbers, nor numbers into booleans, at any depth;
    the field, value and range are named."""
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert str(error.value) == f"scenario: {message}"


def test_whole_numbers_cross_between_int_and_float_fields():
    """An int is a float (qps: 4) and a whole float an int (num_requests: 40.0, as number widgets
    and JSON writers produce), exactly."""
    config = parse_config({"workload": {"num_requests": 40.0, "arrival": {"qps": 4}},
                           "scheduler": {"type": "sglang", "cuda_graph_batch_sizes": [8.0, 1.0]}})
    assert config.workload.num_requests == 40 and type(config.workload.num_requests) is int
    assert config.workload.arrival.qps == 4.0 and type(config.workload.arrival.qps) is float
    assert config.scheduler.cuda_graph_batch_sizes == [1, 8]


def test_ten_thousand_bad_values_are_one_short_line():
    """A list of NaNs gives ten problems and a count, not ten thousand."""
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"arrival": {"process": "diurnal", "rate_curve": [float("nan")] * 10_000}}})
    assert str(error.value).endswith("; and 9990 more problem(s)")
    assert str(error.value).count("Input should be a finite number") == 10


def test_every_shipped_scenario_still_validates():
    """The sample scenarios load unchanged under the strict rules."""
    from sim_core import load_config

    samples = sorted((ROOT / "sample_traces").glob("*.yaml"))
    assert len(samples) == 5
    for sample in samples:
        load_config(sample)


# ---- bounds on generated and scaled workloads --------------------------------------------------

@pytest.mark.parametrize("workload,message", [
    ("{num_requests: 20, arrival: {qps: 1.0e-300}}",
     "workload.arrival.qps: 20 generated arrivals reach 1.86e+301 s, past the 1e+09 s horizon of simulated time; "
     "raise the rate or lower workload.num_requests"),
    ("{num_requests: 20, arrival: {process: diurnal, rate_curve: [1.0e-320]}}",
     "workload.arrival.rate_curve: 20 generated arrivals reach inf s, past the 1e+09 s horizon of simulated time; "
     "raise the rate or lower workload.num_requests"),
    ("{num_requests: 20, arrival: {qps: 0.01}, time_scale_factor: 1000000.0}",
     "workload.time_scale_factor: scaled arrivals reach 1.86e+09 s, past the 1e+09 s horizon of simulated time; "
     "lower the factor"),
    ("{num_requests: 5, prompt_tokens: {distribution: fixed, value: 10000000}, prefill_scale_factor: 1000.0}",
     "workload.prefill_scale_factor: a scaled prompt has 10000000000 tokens, over the limit of 1000000000 tokens "
     "per request"),
])
def test_generated_workloads_stay_within_the_horizon_and_the_token_limit(tmp_path, workload, message):
    """Arrivals and lengths made by the generator or a scale factor are checked, naming the knob."""
    scenario = write(tmp_path / "s.yaml", LINEAR + f"workload: {workload}\n")
    assert refused("run", "--config", scenario) == message


@pytest.mark.parametrize("target,latest", [("1.0e-12", "1e+12"), ("5.0e-324", "inf")])
def test_a_target_rate_that_stretches_a_trace_past_the_horizon_is_refused(tmp_path, target, latest):
    """target_qps is named when rescaling moves the trace's last arrival past the horizon (or
    makes it infinite: the first arrival becomes 0 x inf)."""
    write(tmp_path / "t.csv", HEADER + "0,10,10\n1,10,10\n")
    scenario = write(tmp_path / "s.yaml", LINEAR + f"workload: {{trace_file: t.csv, target_qps: {target}}}\n")
    assert refused("run", "--config", scenario) == (
        f"workload.target_qps: scaled arrivals reach {latest} s, past the 1e+09 s horizon of simulated time; "
        "raise the target rate")


def test_a_conversation_longer_than_a_billion_tokens_is_refused(tmp_path):
    """Sessions resend the conversation: a prompt that grows past the token limit names sessions."""
    scenario = write(tmp_path / "s.yaml", LINEAR + "max_model_len: 10000000\n"
                     "scheduler: {type: sglang, num_blocks: 100000}\nworkload: "
                     "{num_requests: 200, prompt_tokens: {distribution: fixed, value: 10000000}, output_tokens: "
                     "{distribution: fixed, value: 1000000}, "
                     "sessions: {enabled: true, min_turns: 200, max_turns: 200}}\n")
    assert refused("run", "--config", scenario, "--no-limits") == (   # past the run budget too
        "workload.sessions: a generated prompt (the conversation so far) has 2199000000 tokens, over the limit of "
        "1000000000 tokens per request")


# ---- costs that would run the clock away -------------------------------------------------------

def test_a_custom_device_slower_than_a_gigaflop_is_refused(tmp_path):
    """A scenario's own device needs rates of at least 0.001 TFLOP/s and GB/s."""
    scenario = write(tmp_path / "s.yaml", "device: slow\nscheduler: {num_blocks: 100}\ndevices: {slow: {name: slow, "
                     "bf16_tflops: 1.0e-300, memory_gib: 80, memory_bandwidth_gbps: 100, link_bandwidth_gbps: 100}}\n")
    assert refused("run", "--config", scenario) == (
        f"{scenario}: devices.slow.bf16_tflops: got 1e-300; allowed a finite value of at least 0.001")


def test_a_kv_link_so_slow_that_time_runs_away_ends_the_run_cleanly(tmp_path):
    """A transfer 1e299 s long ends with a SimulationError instead of breaking the event queue."""
    scenario = write(tmp_path / "s.yaml", "workload: {num_requests: 3}\n"
                                          "disaggregation: {enabled: true, link_bandwidth_gb_s: 1.0e-300}\n")
    message = refused("run", "--config", scenario)
    assert message.startswith("simulated time would reach ") and message.endswith(
        "s, past the 8.59e+09 s the clock resolves to a microsecond; a cost model, bandwidth or think time in the "
        "scenario makes events this far apart")


def test_the_kernel_refuses_an_event_past_its_clock_limit():
    """An event at 2**33 s or NaN raises SimulationError; the assertion stays for real bugs."""
    kernel = EventKernel()
    for time_s in (2.0**33, float("inf"), float("nan")):
        with pytest.raises(SimulationError):
            kernel.at(time_s, print)
        with pytest.raises(SimulationError):
            kernel.arrive_at(time_s, (0,), print)
    kernel.at(2.0**33 - 1, print)   # just inside the limit is fine


# ---- links and the bounded repr ----------------------------------------------------------------

def test_a_deeply_nested_link_is_refused_in_one_line():
    """A share link whose JSON is nested 100,000 deep is a ConfigError, not a RecursionError."""
    deep = base64.urlsafe_b64encode(zlib.compress(("[" * 100_000 + "]" * 100_000).encode())).decode()
    with pytest.raises(ConfigError, match=r"^scenario link: nested deeper than 50 levels$"):
        decode_scenario(deep)
    assert decode_scenario(encode_scenario({"seed": 3})) == {"seed": 3}


def test_shown_cuts_every_kind_of_value_short():
    """Strings, huge integers and deep lists are echoed in at most the given width."""
    assert shown("x" * 1000, 20) == "'xxxxxxxxxxxxxxxx..."
    assert shown(10**5000) == "<an integer of about 5001 digits>"
    nested: list = []
    for _ in range(10_000):
        nested = [nested]
    assert shown(nested) == "[[[[[...]]]]]"
    assert shown({"a": (1,)}) == "{'a': (1,)}"


def test_json_documents_keep_their_values():
    """The JSON reader returns what json.loads returns for an ordinary scenario."""
    data = {"seed": 3, "workload": {"arrival": {"rate_curve": [1.0, 2.5]}}, "name": "a\"b"}
    text = json.dumps(data, indent=1)
    assert parse_mapping(text, "s.json", json_first=True) == data == parse_yaml(text)
