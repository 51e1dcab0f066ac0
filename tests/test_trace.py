"""Trace files in Vidur's replay format: good rows load; every bad file gets an exact message."""

import numpy as np
import pytest

from sim_core import TraceError, parse_config
from sim_core.workload import build_workload, read_replay_trace

HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"


def write(tmp_path, text, name="t.csv", mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_good_trace_loads_in_arrival_order(tmp_path):
    path = write(tmp_path, HEADER + "0.5,10,2\n0.0,20,3\n0.5,30,4\n")
    arrived, prefill, decode, notes = read_replay_trace(path)
    assert arrived.tolist() == [0.0, 0.5, 0.5]
    assert prefill.tolist() == [20, 10, 30]   # ties keep file order
    assert decode.tolist() == [3, 2, 4]
    assert notes == [f"{path}: rows were not sorted by arrived_at; sorted them (ties keep file order)"]


@pytest.mark.parametrize("body,message", [
    ("", "file is empty; expected a header line 'arrived_at,num_prefill_tokens,num_decode_tokens' "
         "and one row per request"),
    (HEADER, "no data rows after the header"),
    ("time,prompt,output\n0,1,1\n", "missing column(s) arrived_at, num_prefill_tokens, num_decode_tokens; found: "
     "time, prompt, output; expected: arrived_at, num_prefill_tokens, num_decode_tokens"),
    (HEADER + "0,10,2\n1,ten,2\n", "row 2 (line 3), column 'num_prefill_tokens': value 'ten' is not a number"),
    (HEADER + "0,10,2\n1,,2\n", "row 2 (line 3), column 'num_prefill_tokens': empty value"),
    (HEADER + "0,10,NaN\n", "row 1 (line 2), column 'num_decode_tokens': value 'NaN' is not a finite number"),
    (HEADER + "0,10,2\n1,-3,2\n2,-4,2\n", "row 2 (line 3), column 'num_prefill_tokens': value -3 is negative "
     "(and 1 more such rows)"),
    (HEADER + "0,10.5,2\n", "row 1 (line 2), column 'num_prefill_tokens': value 10.5 is not a whole number of tokens"),
    (HEADER + "-1,10,2\n", "row 1 (line 2), column 'arrived_at': arrival time -1.0 is negative"),
    (HEADER + "0,10,2,9\n", "malformed CSV: line 2 has 4 fields but the header has 3"),
    (HEADER + "0,10,2\n1,10,2,9\n", "malformed CSV"),
])
def test_bad_rows_name_file_row_column_and_reason(tmp_path, body, message):
    path = write(tmp_path, body)
    with pytest.raises(TraceError) as error:
        read_replay_trace(path)
    separator = ", " if message.startswith("row") else ": "
    assert str(error.value).startswith(f"{path}{separator}{message}")


def test_zero_token_rows_count_as_one_token_as_vidur_does_and_say_so(tmp_path):
    path = write(tmp_path, HEADER + "0,10,0\n1,0,3\n2,5,0\n")
    _, prefill, decode, notes = read_replay_trace(path)
    assert prefill.tolist() == [10, 1, 5] and decode.tolist() == [1, 3, 1]
    assert notes == [f"{path}: 1 row(s) had num_prefill_tokens = 0; counted as 1 token, as Vidur does",
                     f"{path}: 2 row(s) had num_decode_tokens = 0; counted as 1 token, as Vidur does"]


def test_missing_file_and_wrong_encoding(tmp_path):
    with pytest.raises(TraceError, match="file not found"):
        read_replay_trace(tmp_path / "nope.csv")
    path = write(tmp_path, HEADER.encode() + b"0,10,2\n1,\xff\xfe,2\n", mode="wb")
    with pytest.raises(TraceError, match="not UTF-8 text: byte 0xff on line 3"):
        read_replay_trace(path)


def test_size_limit(tmp_path):
    path = write(tmp_path, HEADER + "0,10,2\n")
    with pytest.raises(TraceError, match="over the 10-byte limit"):
        read_replay_trace(path, max_bytes=10)


def test_requests_longer_than_max_model_len_have_their_prompt_clipped(tmp_path):
    path = write(tmp_path, HEADER + "0,100,20\n1,10,5\n")
    config = parse_config({"max_model_len": 64, "workload": {"trace_file": str(path)}})
    workload = build_workload(config)
    assert workload.num_prefill_tokens.tolist() == [44, 10]
    assert "1 request(s) exceeded max_model_len 64" in workload.notes[0]


def test_an_output_longer_than_max_model_len_cannot_be_clipped(tmp_path):
    path = write(tmp_path, HEADER + "0,10,2\n1,10,80\n")
    config = parse_config({"max_model_len": 64, "workload": {"trace_file": str(path)}})
    with pytest.raises(TraceError, match=r"row 2 \(line 3\), column 'num_decode_tokens': num_decode_tokens 80 alone"):
        build_workload(config)


def test_synthetic_generators_are_seeded_and_follow_their_distribution():
    spec = {"num_requests": 4000, "arrival": {"process": "poisson", "qps": 8.0},
            "prompt_tokens": {"distribution": "uniform", "min": 10, "max": 30},
            "output_tokens": {"distribution": "fixed", "value": 7}}
    one = build_workload(parse_config({"seed": 3, "workload": spec}))
    two = build_workload(parse_config({"seed": 3, "workload": spec}))
    assert np.array_equal(one.arrived_at, two.arrived_at)
    gaps = np.diff(one.arrived_at)
    assert abs(gaps.mean() - 1 / 8.0) < 0.01
    assert one.num_prefill_tokens.min() == 10 and one.num_prefill_tokens.max() == 30
    assert set(one.num_decode_tokens.tolist()) == {7}
    static = build_workload(parse_config({"workload": {**spec, "arrival": {"process": "static"}}}))
    assert static.arrived_at.max() == 0.0
