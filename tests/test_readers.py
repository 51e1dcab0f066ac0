"""Every trace format: its small good file loads exactly; bad files get one exact message."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import TraceError
from sim_core.workload import ReadOptions, Workload, read_trace, write_trace

DATA = "tests/data/traces"


def read(name, **options):
    return read_trace(f"{DATA}/{name}", ReadOptions(**options))


def test_azure_2023_datetimes_become_seconds_after_the_first_request_sorted():
    """Azure's TIMESTAMP (7 fractional digits) -> seconds; unsorted rows are sorted and said so."""
    trace = read("azure_2023.csv")
    assert trace.format == "azure"
    assert trace.workload.arrived_at.tolist() == [0.0, 0.442866, 4.314579, 5.31941]
    assert trace.workload.num_prefill_tokens.tolist() == [374, 879, 396, 91]
    assert trace.workload.num_decode_tokens.tolist() == [44, 1, 109, 17]
    assert trace.workload.notes == (
        f"{DATA}/azure_2023.csv: arrival times are seconds after the first request (2023-11-16T18:15:46.680590 UTC)",
        f"{DATA}/azure_2023.csv: 1 row(s) had GeneratedTokens = 0; counted as 1 token, as Vidur does",
        f"{DATA}/azure_2023.csv: rows were not sorted by TIMESTAMP; sorted them (ties keep file order)")


def test_azure_2024_timestamps_with_a_utc_offset():
    trace = read("azure_2024.csv")
    assert trace.workload.arrived_at.tolist() == [0.0, 0.021492, 1.49007]
    assert trace.workload.num_prefill_tokens.tolist() == [4808, 3180, 110]


def test_burstgpt_filters_by_model_and_log_type_and_says_how_many_rows_it_kept():
    trace = read("burstgpt.csv", model="ChatGPT", log_type="Conversation log")
    assert trace.format == "burstgpt"
    assert trace.workload.arrived_at.tolist() == [5.0, 45.0, 134.0]
    assert trace.workload.num_decode_tokens.tolist() == [18, 1, 300]
    assert trace.workload.notes[0] == (f"{DATA}/burstgpt.csv: kept 3 of 5 row(s) with Model = ChatGPT and "
                                       "Log Type = Conversation log")


def test_burstgpt_filter_matching_nothing_is_an_error():
    with pytest.raises(TraceError) as error:
        read("burstgpt.csv", model="Claude")
    assert str(error.value) == f"{DATA}/burstgpt.csv: no row has Model = Claude (filter set in the workload section)"


def test_mooncake_json_lines_with_prefix_block_hashes():
    """Milliseconds become seconds; hash_ids are carried as flat values with offsets."""
    workload = read("mooncake.jsonl").workload
    assert workload.arrived_at.tolist() == [0.0, 0.25, 0.25, 1.8]
    assert workload.num_prefill_tokens.tolist() == [1100, 600, 1600, 90]
    assert [workload.hashes_of(i).tolist() for i in range(4)] == [[0, 1, 2], [0, 3], [0, 1, 2, 4], [5]]
    assert workload.hash_block_size == 512


def test_canonical_carries_optional_columns():
    workload = read("canonical.csv").workload
    assert {k: v.tolist() for k, v in workload.optional_columns().items()} == {
        "priority": [1, 0, 2], "session_id": [7, 7, 9], "turn": [0, 1, 0], "prefix_group": [2, 2, -1],
        "prefix_len": [256, 576, 0]}
    assert [workload.hashes_of(i).tolist() for i in range(3)] == [[4, 5], [4, 5, 6], []]


def test_vidur_replay_and_lengths_only():
    assert read("vidur.csv").format == "canonical"
    assert read("vidur.csv", format="vidur").workload.optional_columns() == {}
    lengths = read("vidur_lengths.csv")
    assert (lengths.format, lengths.has_arrivals) == ("vidur_lengths", False)
    assert lengths.workload.num_prefill_tokens.tolist() == [200, 1500, 35]


AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BURST = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
MOON = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
BAD_FILES = [
    ("a.csv", "", {}, ("file is empty; expected a header line like "
                        "'arrived_at,num_prefill_tokens,num_decode_tokens' and one row per request")),
    ("b.csv", "time,prompt,output\n0,1,1\n", {}, (
        "cannot tell the trace format from its columns; found: time, prompt, output; expected the columns of one "
        "of: canonical: arrived_at, num_prefill_tokens, num_decode_tokens; vidur_lengths: num_prefill_tokens, "
        "num_decode_tokens; azure: TIMESTAMP, ContextTokens, GeneratedTokens; burstgpt: Timestamp, Request "
        "tokens, Response tokens, Model, Log Type; or Mooncake JSON lines (timestamp, input_length, output_length)")),
    ("c.csv", "timestamp,contexttokens,GeneratedTokens\n", {"format": "azure"}, (
        "missing column(s) TIMESTAMP, ContextTokens; found: timestamp, contexttokens, GeneratedTokens; expected: "
        "TIMESTAMP, ContextTokens, GeneratedTokens (names are case-sensitive: 'timestamp' should be 'TIMESTAMP', "
        "'contexttokens' should be 'ContextTokens')")),
    ("d.csv", AZURE + "2023-11-16 18:15:46,10,2\nyesterday,5,5\n", {},
     "row 2 (line 3), column 'TIMESTAMP': value 'yesterday' is not a date-time "
     "(expected e.g. 2023-11-16 18:15:46.6805900)"),
    ("e.csv", AZURE + "2023-11-16 18:15:46,10,2\n2023-11-16 18:15:47,-5,5\n", {},
     "row 2 (line 3), column 'ContextTokens': value -5 is negative"),
    ("f.csv", BURST + "1,ChatGPT,10,abc,10,API log\n", {},
     "row 1 (line 2), column 'Response tokens': value 'abc' is not a number"),
    ("g.csv", BURST + "-2,ChatGPT,10,3,13,API log\n", {},
     "row 1 (line 2), column 'Timestamp': arrival time -2.0 is negative"),
    ("h.jsonl", MOON + '{"timestamp": 5, "input_length": 10}\n', {},
     "row 2 (line 2), column 'output_length': missing key 'output_length'"),
    ("i.jsonl", MOON + '{"timestamp": 5, "input_length": "ten", "output_length": 1}\n', {},
     "row 2 (line 2), column 'input_length': value \"ten\" is not a finite number"),
    ("j.jsonl", MOON + '{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]}\n', {},
     "row 2 (line 2), column 'hash_ids': value [1, -2] is not a list of non-negative 64-bit integers"),
    ("k.jsonl", MOON + "[1, 2]\n", {}, "row 2 (line 2): expected a JSON object per line, got list"),
    ("k2.jsonl", MOON + '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551616]}\n',
     {}, "row 2 (line 2), column 'hash_ids': value [18446744073709551616] is not a list of non-negative "
         "64-bit integers"),
    ("l.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,turn\n0,5,5,1.5\n", {},
     "row 1 (line 2), column 'turn': value 1.5 is not a whole number"),
    ("m.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,hash_ids\n0,5,5,1 x\n", {},
     "row 1 (line 2), column 'hash_ids': value '1 x' is not a list of non-negative 64-bit integers"),
    ("n.csv", "num_prefill_tokens,num_decode_tokens\n5,inf\n", {},
     "row 1 (line 2), column 'num_decode_tokens': value 'inf' is not a finite number"),
]


@pytest.mark.parametrize("name,text,options,message", BAD_FILES, ids=[case[0] for case in BAD_FILES])
def test_bad_files_name_file_row_column_and_reason(tmp_path, name, text, options, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError) as error:
        read_trace(path, ReadOptions(**options))
    assert str(error.value) == f"{path}{', ' if message.startswith('row') else ': '}{message}"


def test_utf16_files_and_stray_bytes_are_named(tmp_path):
    path = tmp_path / "u.csv"
    path.write_bytes("arrived_at,num_prefill_tokens,num_decode_tokens\n".encode("utf-16"))
    with pytest.raises(TraceError, match="not UTF-8 text: the file is UTF-16"):
        read_trace(path)
    path.write_bytes(AZURE.encode() + b"2023-11-16 18:15:46,10,2\n2023-11-16 18:15:47,1\xe9,2\n")
    with pytest.raises(TraceError) as error:
        read_trace(path)
    assert str(error.value) == f"{path}: not UTF-8 text: byte 0xe9 on line 3"


def test_skipping_bad_rows_drops_them_and_says_how_many_and_why(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(AZURE + "2023-11-16 18:15:46,10,2\nnope,5,5\n2023-11-16 18:15:48,x,5\n"
                    "2023-11-16 18:15:49,7,-1\n2023-11-16 18:15:50,8,3\n")
    workload = read_trace(path, ReadOptions(on_bad_rows="skip")).workload
    assert workload.num_prefill_tokens.tolist() == [10, 8]
    assert workload.notes[0] == (f"{path}: skipped 3 of 5 row(s) as asked (on_bad_rows: skip): 1 value(s) not a "
                                 "date-time in 'TIMESTAMP'; 1 value(s) not a finite number in 'ContextTokens'; "
                                 "1 negative value(s) in 'GeneratedTokens'")


def test_duplicates_are_counted_and_dropped_only_when_asked(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n0,5,5\n1,5,5\n0,5,5\n")
    kept = read_trace(path).workload
    assert len(kept) == 4
    assert kept.notes[-1] == (f"{path}: 2 row(s) repeat an earlier row's arrival time and lengths exactly; "
                              "kept them (set drop_duplicates to remove them)")
    dropped = read_trace(path, ReadOptions(drop_duplicates=True)).workload
    assert dropped.arrived_at.tolist() == [0.0, 1.0]


def test_size_limit_applies_to_every_format(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(MOON * 10)
    with pytest.raises(TraceError) as error:
        read_trace(path, ReadOptions(max_bytes=100))
    assert str(error.value) == f"{path}: file is {len(MOON) * 10} bytes, over the 100-byte limit"


def test_chunked_reading_numbers_rows_across_chunks(tmp_path, monkeypatch):
    """A bad value far into a file read in chunks is named by its row in the whole file."""
    from sim_core.workload import csv_table

    monkeypatch.setattr(csv_table, "CHUNK_ROWS", 4)
    rows = [f"{i},{i + 1},3" for i in range(10)]
    rows[8] = "8,9,oops"
    path = tmp_path / "c.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "\n".join(rows) + "\n")
    with pytest.raises(TraceError, match=r"row 9 \(line 10\), column 'num_decode_tokens': value 'oops'"):
        read_trace(path)
    rows[8] = "8,9,3"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "\n".join(rows) + "\n")
    assert np.array_equal(read_trace(path).workload.num_prefill_tokens, np.arange(1, 11))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_written_canonical_traces_read_back_exactly(tmp_path_factory, data):
    """write_trace then read_trace gives back every column, optional ones and hashes included."""
    n = data.draw(st.integers(1, 30))
    times = sorted(data.draw(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n)))

    def ints(lo, hi):
        return np.array(data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dtype=np.int64)

    lengths = ints(0, 5)
    hashes = np.array(data.draw(st.lists(st.integers(0, 2**40), min_size=int(lengths.sum()),
                                         max_size=int(lengths.sum()))), dtype=np.int64)
    original = Workload(np.array(times), ints(1, 10**6), ints(1, 10**6), "w", priority=ints(-5, 5),
                        session_id=ints(0, 99), turn=ints(0, 9), hash_ids=hashes,
                        hash_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64), hash_block_size=512)
    path = tmp_path_factory.mktemp("rt") / "w.csv"
    write_trace(original, path)
    back = read_trace(path).workload
    for name in ("arrived_at", "num_prefill_tokens", "num_decode_tokens", "priority", "session_id", "turn",
                 "hash_ids", "hash_offsets"):
        assert np.array_equal(getattr(back, name), getattr(original, name)), name


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["0", "1.5", "-2", "x", "", "nan", "7"]),
                          st.sampled_from(["3", "0", "-1", "2.5", "abc", "10"]),
                          st.sampled_from(["4", "9", "", "-3", "1e2"])), min_size=1, max_size=25))
def test_skipping_never_drops_a_row_silently(tmp_path_factory, rows):
    """With on_bad_rows: skip, every row is either kept or counted in the skip note."""
    path = tmp_path_factory.mktemp("skip") / "t.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(",".join(r) + "\n" for r in rows))
    try:
        workload = read_trace(path, ReadOptions(on_bad_rows="skip")).workload
    except TraceError as error:
        assert "no usable rows" in str(error)
        return
    notes = [n for n in workload.notes if "skipped" in n]
    skipped = int(notes[0].split("skipped ")[1].split(" of")[0]) if notes else 0
    assert len(workload) + skipped == len(rows)
