"""Vidur-format CSV readers: good files give tidy per-operator rows; bad ones one clear line."""

import pytest

from sim_core.predictor.profiles import ProfileError, read_attention, read_collective, read_mlp

MLP_HEADER = "time_stats.mlp_up_proj.median,time_stats.add.median,num_tokens,num_tensor_parallel_workers\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_mlp_rows_become_seconds_per_operator_and_empty_cells_are_skipped(tmp_path):
    path = write(tmp_path, "mlp.csv", MLP_HEADER + "2.0,0.05,4096,1\n,0.01,16,2\n")
    frames = read_mlp(path)
    assert frames["mlp_up_proj"].to_dict("list") == {"num_tokens": [4096.0], "tp": [1.0], "time_s": [0.002]}
    assert frames["add"]["time_s"].tolist() == [0.05e-3, 0.01e-3]


def test_attention_rows_split_into_prefill_decode_and_cache_save(tmp_path):
    header = ("time_stats.attn_prefill.median,time_stats.attn_decode.median,time_stats.attn_kv_cache_save.median,"
              "batch_size,prefill_chunk_size,kv_cache_size,is_prefill,num_tensor_parallel_workers\n")
    path = write(tmp_path, "attention.csv", header + "0.5,,0.01,1,256,512,True,1\n,0.2,0.003,8,0,1024,False,1\n")
    frames = read_attention(path)
    assert frames["attn_prefill"].to_dict("list") == {"kv_cache_size": [512.0], "prefill_chunk_size": [256.0],
                                                      "tp": [1.0], "time_s": [0.0005]}
    assert frames["attn_decode"][["batch_size", "kv_cache_size"]].values.tolist() == [[8.0, 1024.0]]
    assert frames["attn_kv_cache_save"]["num_tokens"].tolist() == [256.0, 8.0]


def test_collectives_keep_single_node_rows_and_name_workers_tp(tmp_path):
    header = ",time_stats.all_reduce.median,rank,num_workers,size,collective,devices_per_node\n"
    path = write(tmp_path, "all_reduce.csv", header + "0,0.01,0,2,2048,all_reduce,2\n1,0.5,0,4,2048,all_reduce,2\n")
    frame = read_collective(path, "all_reduce")
    assert frame.to_dict("list") == {"size": [2048.0], "tp": [2.0], "time_s": [1e-5]}


@pytest.mark.parametrize("body,message", [
    ("2.0,0.05,lots,1\n", "mlp.csv, row 1 (line 2), column 'num_tokens': 'lots' is not a number"),
    ("2.0,0.05,16,1\n2.0,-1,16,1\n", "mlp.csv, row 2 (line 3), column 'time_stats.add.median': -1 is below 0"),
    ("2.0,0.05,,1\n", "mlp.csv, row 1 (line 2), column 'num_tokens': empty"),
])
def test_bad_cells_are_named_by_file_row_and_column(tmp_path, body, message):
    path = write(tmp_path, "mlp.csv", MLP_HEADER + body)
    with pytest.raises(ProfileError) as error:
        read_mlp(path)
    assert str(error.value) == f"{path.parent}/{message}"


def test_missing_columns_and_files_are_clear(tmp_path):
    path = write(tmp_path, "mlp.csv", "time_stats.add.median,num_tokens\n0.1,16\n")
    with pytest.raises(ProfileError, match="mlp.csv: missing column 'num_tensor_parallel_workers'"):
        read_mlp(path)
    with pytest.raises(ProfileError, match="nothing.csv: file not found"):
        read_mlp(tmp_path / "nothing.csv")
    bad = write(tmp_path, "attention.csv", "time_stats.attn_decode.median,batch_size,prefill_chunk_size,"
                "kv_cache_size,is_prefill,num_tensor_parallel_workers\n0.1,1,0,16,maybe,1\n")
    with pytest.raises(ProfileError, match="row 1 .*column 'is_prefill': 'maybe' is not True/False"):
        read_attention(bad)
