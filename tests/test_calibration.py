"""Engine overheads and calibration: vLLM's API-server time reaches TTFT and E2E (not the token
gaps), a calibration file fills the knobs a scenario leaves unset, and `calibrate` recovers
the device efficiency and API-server time that produced a set of runs."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import yaml

from sim_core import parse_config, run_simulation
from sim_core.accuracy.calibrate import (
    _Search,
    adds_api_server,
    calibrate,
    knob_values,
    left_out_reason,
    run_overrides,
    split_runs,
    truncated,
)
from sim_core.accuracy.client_load import LoadStage, shared_prefix_workload, stage_windows
from sim_core.accuracy.measured import MeasuredRun, MeasuredStage
from sim_core.accuracy.replay import replay
from sim_core.accuracy.server import vllm_scenario
from sim_core.config.file_policy import confine_paths
from sim_core.errors import ConfigError
from sim_core.predictor.host import engine_host_config
from sim_core.workload import Workload


def _one_request(api_server_s: float):
    config = parse_config({"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 256,
                           "scheduler": {"type": "vllm_v1", "num_blocks": 64, "api_server_s": api_server_s},
                           "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "engine": {"record": "full"}})
    return run_simulation(config, Workload(np.array([0.0]), np.array([10]), np.array([3]), "test"))


def test_the_api_server_adds_to_ttft_and_e2e_but_not_to_the_engine_or_the_gaps():
    """A 10-token prompt at 10 ms + 1 ms/token prefills in 20 ms; with a 5 ms API server the
    client sees its first token at 25 ms. The engine's event times and the token gaps do not
    move: the API server's time is outside the engine."""
    plain, served = _one_request(0.0), _one_request(0.005)
    assert plain.requests["ttft"][0] == pytest.approx(0.020)
    assert served.requests["ttft"][0] == pytest.approx(0.025)
    assert served.requests["e2e"][0] == pytest.approx(plain.requests["e2e"][0] + 0.005)
    assert served.requests["prefill_completed_at"][0] == plain.requests["prefill_completed_at"][0]
    assert served.summary["tbt_p50_s"] == plain.summary["tbt_p50_s"]


def _calibration_file(tmp_path, engine="vllm_v1", scheduler=None):
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump({"calibration": {"engine": engine, "device": "h100-sxm"},
                                    "predictor": {"memory_efficiency": 0.9, "cpu_sample_s": 0.0002},
                                    "scheduler": scheduler or {"api_server_s": 0.004, "host_scale": 0.5}}))
    return path


def test_a_calibration_file_fills_the_knobs_the_scenario_leaves_unset(tmp_path):
    """The file's memory efficiency, host time, host factor and API-server time apply; the
    scenario's own cpu_sample_s wins over the file's."""
    path = _calibration_file(tmp_path)
    config = parse_config({"device": "h100-sxm", "scheduler": {"type": "vllm_v1"},
                           "predictor": {"type": "roofline", "calibration": path.name, "cpu_sample_s": 0.003}},
                          base_dir=tmp_path)
    assert config.predictor.memory_efficiency == 0.9 and config.predictor.cpu_sample_s == 0.003
    assert config.scheduler.api_server_s == 0.004 and config.scheduler.host_scale == 0.5


def test_a_vllm_v1_calibration_with_phase_knobs_but_no_host_factor_is_refused(tmp_path):
    """A vllm_v1 file written before vllm_v1 had its own host factor holds phase knobs already
    scaled (cpu_sample_s 0.0002) and no scheduler.host_scale: vllm_v1 would multiply them by
    its default 0.44 again, so the file is refused, naming the knob and the fix. Saying
    host_scale 1 makes the knobs the engine's own times: 0.0002 stays 0.0002 in the predictor."""
    old = _calibration_file(tmp_path, scheduler={"api_server_s": 0.004})
    scenario = {"device": "h100-sxm", "scheduler": {"type": "vllm_v1"},
                "predictor": {"type": "roofline", "calibration": str(old)}}
    with pytest.raises(ConfigError, match=r"cal.yaml: predictor.cpu_sample_s: a calibration for vllm_v1 sets "
                                          r"host-phase knobs but no scheduler.host_scale.*host_scale: 1"):
        parse_config(scenario)
    own = _calibration_file(tmp_path, scheduler={"api_server_s": 0.004, "host_scale": 1})
    config = parse_config({**scenario, "predictor": {"type": "roofline", "calibration": str(own)}})
    assert config.scheduler.host_scale == 1 and engine_host_config(config).cpu_sample_s == 0.0002
    assert "calibration" not in config.predictor.model_dump()     # consumed: the values are in the scenario


def test_a_calibration_for_another_engine_leaves_the_scheduler_alone(tmp_path):
    """A vllm_v1 calibration names an API-server time sarathi does not have, nor the default
    policy (vllm) of a scenario that names none: only its predictor knobs apply."""
    config = parse_config({"scheduler": {"type": "sarathi"},
                           "predictor": {"type": "roofline", "calibration": str(_calibration_file(tmp_path))}})
    assert config.predictor.memory_efficiency == 0.9 and config.scheduler.type == "sarathi"
    default = parse_config({"predictor": {"type": "roofline", "calibration": str(_calibration_file(tmp_path))}})
    assert default.scheduler.type == "vllm" and default.predictor.memory_efficiency == 0.9   # no type: the default


def test_a_file_that_is_not_a_calibration_is_named(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("predictor: {memory_efficiency: 0.5}\n")
    with pytest.raises(ConfigError, match=r"other.yaml: not a calibration file \(no 'calibration' section"):
        parse_config({"predictor": {"type": "roofline", "calibration": str(path)}})


def test_a_link_cannot_name_a_calibration_file(tmp_path):
    """From the web, predictor.calibration is refused before anything is opened."""
    with pytest.raises(ConfigError, match=r"link: predictor.calibration: not accepted from a link or an upload"):
        confine_paths({"predictor": {"calibration": "/etc/passwd"}}, [tmp_path], source="link")


def test_split_holds_out_every_kth_run_by_name():
    """Five runs, every 4th held out: the 4th by name; with two runs nothing is held out."""
    runs = [MeasuredRun(name, "t", {}, Workload(np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64), "t"), (), 1)
            for name in "edcba"]
    fit, held = split_runs(runs, 4)
    assert [r.name for r in held] == ["d"] and [r.name for r in fit] == ["a", "b", "c", "e"]
    assert split_runs(runs[:2], 4)[1] == []


def _synthetic_run(name: str, rates: tuple[float, float], truth: dict, seed: int) -> MeasuredRun:
    """A 'measured' run made by simulating known settings (Llama-2-7B on an A100)."""
    stages = [LoadStage(rates[0], 40.0), LoadStage(rates[1], 40.0)]
    workload = shared_prefix_workload(stages, "constant", 300, 60, np.random.default_rng(seed), name, pool=20)
    scenario = vllm_scenario(name, "llama-2-7b", "a100-80gb", 1, {"max_num_seqs": 64}, seed)
    windows = stage_windows(stages)
    stub = tuple(MeasuredStage(i, w[0], w[1], s.rate, 0, 0, {}) for i, (w, s) in enumerate(zip(windows, stages)))
    made = replay(MeasuredRun(name, "test", scenario, workload, stub, 60.0), truth)
    return MeasuredRun(name, "test", scenario, workload, made.stages, 60.0)


def test_calibrate_recovers_the_settings_that_made_the_runs():
    """Runs simulated with memory efficiency 0.6 (the A100 default is 0.8) and a 4 ms API
    server: fitting from the defaults finds both within a few percent (the host time trades a
    little against the efficiencies), and the fitted settings reproduce the held-out run's mean
    latencies within 2% and its percentiles within 5%. The host factor is vllm_v1's own knob
    (truth: its default 0.44); at these small batches its on-path part, sampling, is a few
    hundred microseconds a step, so the fit pins it only within a factor of 2."""
    truth = {"predictor": {"type": "roofline", "memory_efficiency": 0.6}, "scheduler": {"api_server_s": 0.004}}
    runs = [_synthetic_run(f"run{i}", rates, truth, i) for i, rates in enumerate([(1, 3), (2, 4), (1, 2), (3, 5)])]
    result = calibrate(runs, "roofline", window_s=40.0, hold_out_every=4)
    assert result.held_out_runs == ["run3"]
    assert result.values["memory_efficiency"] == pytest.approx(0.6, rel=0.05)
    assert result.values["api_server_s"] == pytest.approx(0.004, abs=0.001)
    assert max(v for k, v in result.held_out_errors.items() if k.endswith("mean")) < 2.0
    assert max(result.held_out_errors.values()) < 5.0
    scheduler = result.knobs["scheduler"]
    assert set(scheduler) == {"api_server_s", "host_scale"}
    assert scheduler["api_server_s"] == pytest.approx(0.004, abs=0.001)
    assert 0.44 / 2 < scheduler["host_scale"] < 0.44 * 2     # vllm_v1's own factor, weakly identified
    assert not any(knob.startswith("cpu_") for knob in result.knobs["predictor"])


def test_the_host_factor_is_the_engines_own_knob_when_it_has_one():
    """host_scale 0.5: vllm_v1 (its own host_scale; no phase knobs are written) takes it as is;
    for an engine without one the predictor's phases are scaled, cpu_sample_s 1 ms -> 0.5 ms."""
    values = {"host_scale": 0.5, "api_server_s": 0.003, "memory_efficiency": 0.81234}
    assert knob_values(values, None, "roofline") == {
        "predictor": {"type": "roofline", "memory_efficiency": 0.8123},
        "scheduler": {"api_server_s": 0.003, "host_scale": 0.5}}
    scaled = knob_values(values, {"cpu_sample_s": 0.001, "cpu_sample_per_request_s": 0.000005}, "roofline")
    assert scaled["predictor"] == {"type": "roofline", "memory_efficiency": 0.8123, "cpu_sample_s": 0.0005,
                                   "cpu_sample_per_request_s": 0.0000025}
    assert scaled["scheduler"] == {"api_server_s": 0.003}


def test_a_run_that_fixes_its_api_server_takes_no_fitted_api_server():
    """A per-request log of vLLM's own stats fixes api_server_s at 0 (no API server in its
    times): the fitted API server's time is not applied to it (nor fitted from it); a run whose
    reader sets nothing takes the knobs as they are."""
    run = _synthetic_run("a", (1, 2), {"predictor": {"type": "roofline"}}, 0)
    fixed = replace(run, name="log", scenario={**run.scenario, "scheduler": {**run.scenario["scheduler"],
                                                                             "api_server_s": 0.0}})
    knobs = {"predictor": {"type": "roofline"}, "scheduler": {"api_server_s": 0.003, "host_scale": 0.5}}
    assert adds_api_server(run) and not adds_api_server(fixed)
    assert run_overrides(run, knobs) == knobs
    assert run_overrides(fixed, knobs) == {"predictor": {"type": "roofline"}, "scheduler": {"host_scale": 0.5}}


def test_runs_the_fit_cannot_use_are_left_out_with_the_reason():
    """A saturated run, an unsupported one and one on a GPU the silicon predictor has no kernels
    for (an RTX 4090) are left out of a silicon fit, each with its reason; the roofline replays
    the RTX 4090 run. With nothing left, calibrate says so in one line."""
    run = _synthetic_run("a", (1, 2), {"predictor": {"type": "roofline"}}, 0)
    saturated = replace(run, name="s", saturated=True)
    unsupported = replace(run, name="u", unsupported="model 'x' is not in the catalog")
    rtx = replace(run, name="g", scenario={**run.scenario, "device": "rtx-4090"})
    assert left_out_reason(run, "silicon") == "" and left_out_reason(rtx, "roofline") == ""
    assert left_out_reason(saturated, "silicon") == "saturated (client time-outs)"
    assert left_out_reason(unsupported, "silicon") == "model 'x' is not in the catalog"
    assert "silicon has measured kernels only for the catalog devices" in left_out_reason(rtx, "silicon")
    assert "not 'rtx-4090'" in left_out_reason(rtx, "silicon")
    with pytest.raises(ConfigError, match=r"^calibrate: no measured run to fit \(saturated runs, and runs the "
                                          r"predictor cannot replay, are left out\)$"):
        calibrate([saturated, unsupported, rtx], "silicon")


def test_truncation_keeps_the_first_seconds_of_each_stage():
    """Stages of 40 s at 1 and 3 req/s, first 10 s each: only requests sent in 0-10 s and
    40-50 s remain, and the whole-run figures are dropped."""
    truth = {"predictor": {"type": "roofline"}}
    run = _synthetic_run("t", (1, 3), truth, 0)
    run = replace(run, stages=(MeasuredStage(-1, 0, 80, float("nan"), 0, 0, {}), *run.stages))
    short = truncated(run, 10.0)
    sent = short.workload.arrived_at
    assert np.all(((sent >= 0) & (sent < 10)) | ((sent >= 40) & (sent < 50)))
    assert [s.index for s in short.stages] == [0, 1]


def test_the_calibrate_command_writes_a_file_the_accuracy_command_replays_with(tmp_path):
    """`calibrate` on one inference-perf folder (nothing to hold out) prints that the fit is
    unchecked and writes a calibration file; `accuracy --calibration FILE` replays with it; a
    folder without runs is one line on stderr, exit 2."""
    from conftest import ROOT
    from test_accuracy import _write_inference_perf

    folder = _write_inference_perf(tmp_path / "runs" / "run-h100")
    out = tmp_path / "cal.yaml"
    done = subprocess.run([sys.executable, "-m", "sim_core", "calibrate", "--measured", str(folder.parent),
                           "--out", str(out), "--window", "10", "--hold-out-every", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "no run held out (fewer than 3 runs, or --hold-out-every 0): the fit is unchecked" in done.stdout
    written = yaml.safe_load(out.read_text())
    assert written["calibration"]["fit_runs"] == ["run-h100"] and written["calibration"]["device"] == "h100-sxm"
    assert written["predictor"]["type"] == "roofline" and 0 <= written["scheduler"]["api_server_s"] <= 0.1
    done = subprocess.run([sys.executable, "-m", "sim_core", "accuracy", str(folder.parent), "--calibration", str(out),
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["median_abs_error_pct"]) >= {"e2e mean", "ttft mean"}
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "sim_core", "calibrate", "--measured", str(tmp_path / "empty"),
                           "--out", str(tmp_path / "x.yaml")], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.yaml").exists()


def _log_run(run: MeasuredRun, name: str, extra_ttft_s: float = 0.0) -> MeasuredRun:
    """`run` as a per-request log of vLLM's own stats reads it: api_server_s fixed at 0, each
    stage's measured TTFT and E2E means raised by `extra_ttft_s`."""
    def raised(stage: MeasuredStage) -> MeasuredStage:
        values = {metric: ({**stats, "mean": stats["mean"] + extra_ttft_s} if metric in ("ttft", "e2e") else stats)
                  for metric, stats in stage.values.items()}
        return replace(stage, values=values)
    return replace(run, name=name, stages=tuple(raised(stage) for stage in run.stages),
                   scenario={**run.scenario, "scheduler": {**run.scenario["scheduler"], "api_server_s": 0.0}})


def test_a_fit_on_per_request_logs_alone_writes_no_api_server():
    """Runs whose reader fixed api_server_s at 0 hold no API server in their times, so nothing
    fits it: the calibration leaves it out of its values and knobs (were it written as 0, an
    HTTP benchmark's replay would lose the engine's default API server time); the other terms
    are fitted as usual. knob_values writes api_server_s only when the values hold it."""
    truth = {"predictor": {"type": "roofline", "memory_efficiency": 0.6}}
    runs = [_log_run(_synthetic_run(f"run{i}", rates, truth, i), f"log{i}") for i, rates in enumerate([(1, 3), (2, 4)])]
    result = calibrate(runs, "roofline", window_s=40.0, hold_out_every=0)
    assert "api_server_s" not in result.values
    assert "api_server_s" not in result.knobs.get("scheduler", {})
    assert "api_server_s" not in result.document().get("scheduler", {})
    assert knob_values({"host_scale": 0.5}, None, "roofline") == {"predictor": {"type": "roofline"},
                                                                   "scheduler": {"host_scale": 0.5}}
    assert knob_values({"host_scale": 2.0}, {"cpu_a": 1e-4}, "roofline") == {
        "predictor": {"type": "roofline", "cpu_a": 2e-4}}


def test_the_api_server_time_comes_only_from_runs_that_hold_it():
    """Two HTTP runs simulated with a 4 ms API server beside a per-request log whose measured
    TTFT and E2E are 0.5 s above its replay: the API server's time is the median TTFT residual
    of the HTTP runs' stages alone, about 4 ms at the true settings; with the log's stages
    counted it would be pulled towards 0.5 s (their residuals would be a third of the median's
    samples or more)."""
    truth = {"predictor": {"type": "roofline", "memory_efficiency": 0.6}, "scheduler": {"api_server_s": 0.004}}
    http = [_synthetic_run(f"run{i}", rates, truth, i) for i, rates in enumerate([(1, 3), (2, 4)])]
    log = _log_run(_synthetic_run("log", (1, 2), {"predictor": truth["predictor"]}, 7), "log", 0.5)
    start = {"host_scale": 0.44, "memory_efficiency": 0.6}
    search = _Search([*http, log], "roofline", start, None, None)
    assert search.best["api_server_s"] == pytest.approx(0.004, abs=0.001)
