"""Which files a scenario from the web may name: only inside the server's folders, checked before
anything is opened, and the refusal never tells whether a file exists."""

from __future__ import annotations

import os
import typing

import pytest
from pydantic import BaseModel

from sim_core.config import SimulationConfig
from sim_core.config.choices import section_fields
from sim_core.config.file_policy import PATH_FIELDS, confine_paths
from sim_core.errors import ConfigError

TRACE_REFUSAL = ("link: workload.trace_file: only uploaded traces and the shipped sample traces can be used "
                 "here; upload the file on the Scenario or Workload page")


def refusal(data: dict, roots, profiles=()) -> str:
    with pytest.raises(ConfigError) as caught:
        confine_paths(data, roots, profiles, source="link")
    return str(caught.value)


def test_a_file_outside_the_roots_is_refused_the_same_way_whether_or_not_it_exists(tmp_path):
    """/etc/passwd (exists) and /etc/no-such-file get the very same message."""
    store = tmp_path / "store"
    store.mkdir()
    assert refusal({"workload": {"trace_file": "/etc/passwd"}}, [store]) == TRACE_REFUSAL
    assert refusal({"workload": {"trace_file": "/etc/no-such-file"}}, [store]) == TRACE_REFUSAL


def test_dot_dot_and_symbolic_links_cannot_leave_a_root(tmp_path):
    """A `../` path is resolved first; a link inside the store that points outside is refused."""
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "secret.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n")
    (store / "link.csv").symlink_to(tmp_path / "secret.csv")
    assert refusal({"workload": {"trace_file": f"{store}/../secret.csv"}}, [store]) == TRACE_REFUSAL
    assert refusal({"workload": {"trace_file": str(store / "link.csv")}}, [store]) == TRACE_REFUSAL


def test_relative_paths_are_taken_from_the_current_folder(tmp_path, monkeypatch):
    """`sample_traces/chat.csv` from the project folder is inside it; `../x.csv` is not."""
    samples = tmp_path / "sample_traces"
    samples.mkdir()
    monkeypatch.chdir(tmp_path)
    confine_paths({"workload": {"trace_file": "sample_traces/chat.csv"}}, [samples])
    assert refusal({"workload": {"trace_file": "../x.csv"}}, [samples]) == TRACE_REFUSAL


def test_every_trace_field_is_confined(tmp_path):
    """The arrival, prompt and output length traces are checked like the main trace."""
    for section in ("arrival", "prompt_tokens", "output_tokens"):
        message = refusal({"workload": {section: {"trace_file": "/etc/shadow"}}}, [tmp_path])
        assert message.startswith(f"link: workload.{section}.trace_file: only uploaded traces")


def test_server_only_fields_are_refused_whatever_they_name(tmp_path):
    """cache_dir makes the server write; hf_config reads a file the visitor cannot upload."""
    inside = str(tmp_path / "x")
    assert refusal({"predictor": {"cache_dir": inside}}, [tmp_path]) == (
        "link: predictor.cache_dir: not accepted from a link or an upload (the server alone chooses where it writes)")
    assert refusal({"models": {"mine": {"hf_config": inside}}}, [tmp_path]) == (
        "link: models.mine.hf_config: not accepted from a link or an upload (paste the model's fields under "
        "models.<id> instead)")


def test_profile_folders_only_inside_the_allowed_profile_roots(tmp_path):
    """profiles_dir is checked against the profile roots, never the upload store."""
    profiles = tmp_path / "profiles"
    (profiles / "a100").mkdir(parents=True)
    confine_paths({"predictor": {"profiles_dir": str(profiles / "a100")}}, [tmp_path / "store"], [profiles])
    assert refusal({"predictor": {"profiles_dir": str(profiles / "a100")}}, [profiles]).startswith(
        "link: predictor.profiles_dir: only profile folders this server allows")


def test_null_values_and_non_strings_are_left_to_validation(tmp_path):
    """An absent path is fine; a number where a path goes is validation's to name."""
    confine_paths({"workload": {"trace_file": None}, "models": {1: {"name": "x"}}}, [tmp_path])
    confine_paths({"workload": {"trace_file": 5}}, [tmp_path])


def test_a_nul_byte_or_an_empty_name_is_refused(tmp_path):
    assert refusal({"workload": {"trace_file": str(tmp_path) + "/a\x00b"}}, [tmp_path]) == TRACE_REFUSAL
    assert refusal({"workload": {"trace_file": " "}}, [tmp_path]) == TRACE_REFUSAL


def test_the_policy_covers_every_field_of_the_scenario_that_names_a_file():
    """A new `*_file` / `*_dir` field anywhere in SimulationConfig must be added to PATH_FIELDS."""
    found = set(_path_like_fields(SimulationConfig, ""))
    loader_keys = {"models.*.hf_config", "predictor.calibration"}   # read and consumed while loading
    assert found == {field for field in PATH_FIELDS if field not in loader_keys}


def _path_like_fields(model: type[BaseModel], prefix: str):
    for name, info in section_fields(model).items():   # the scheduler section: every policy's knobs
        dotted = f"{prefix}{name}"
        if name.endswith(("_file", "_dir", "_path")):
            yield dotted
        for inner in _models_in(info.annotation):
            star = typing.get_origin(info.annotation) is dict
            yield from _path_like_fields(inner, f"{dotted}.*." if star else f"{dotted}.")


def _models_in(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def test_the_check_opens_nothing(tmp_path):
    """A FIFO as trace_file would block any open(): the check returns at once."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    confine_paths({"workload": {"trace_file": str(fifo)}}, [tmp_path])


def test_a_server_only_key_is_refused_even_when_null(tmp_path):
    """`hf_config: null` would make the loader open a file named 'None': the key itself is refused."""
    assert refusal({"models": {"m": {"hf_config": None}}}, [tmp_path]).startswith(
        "link: models.m.hf_config: not accepted from a link or an upload")
