"""The profiler's pure parts: which shapes it measures, the CSVs it writes, its message without PyTorch."""

import sys

from sim_core.catalog import MODELS
from sim_core.predictor.profiles import read_attention, read_mlp
from sim_core.profile.__main__ import main
from sim_core.profile.plan import decode_shapes, prefill_shapes, token_grid
from sim_core.profile.writer import attention_row, mlp_row, write_rows


def test_token_grid_is_dense_for_small_batches_and_sparse_for_large():
    grid = token_grid(1300)
    assert grid[:6] == [1, 2, 4, 8, 16, 24]
    assert grid[-4:] == [1024, 1152, 1280, 1300]
    assert len(grid) == 3 + 16 + 28 + 2 + 1


def test_attention_shapes_stay_within_max_model_len():
    assert prefill_shapes(1024, (256, 1024), 512) == [(256, 0), (256, 512), (1024, 0)]
    assert decode_shapes(256, 2, (1, 2, 4)) == [(1, 64), (1, 128), (1, 256), (2, 64), (2, 128), (2, 256)]


def test_written_csvs_read_back_as_vidur_profiles(tmp_path):
    model = MODELS["llama-2-7b"]
    mlp = write_rows(tmp_path / "mlp.csv", [mlp_row(model, 1, 16, {"mlp_up_proj": [1.0, 2.0, 3.0]})])
    assert read_mlp(mlp)["mlp_up_proj"].to_dict("list") == {"num_tokens": [16.0], "tp": [1.0], "time_s": [0.002]}
    assert "time_stats.mlp_up_proj.std" in mlp.read_text().splitlines()[0]
    rows = [attention_row(model, 1, 1, 128, 0, True, 16, 4096, {"attn_prefill": [0.5]}),
            attention_row(model, 1, 4, 1, 512, False, 16, 4096, {"attn_decode": [0.1]})]
    frames = read_attention(write_rows(tmp_path / "attention.csv", rows))
    assert frames["attn_prefill"]["time_s"].tolist() == [0.0005]
    assert frames["attn_decode"]["batch_size"].tolist() == [4.0]


def test_without_pytorch_the_profiler_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert main(["--model", "phi-2", "--device", "a100-80gb", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: profiling needs PyTorch with CUDA")


def test_the_profiler_refuses_a_model_its_layout_cannot_hold(tmp_path, capsys):
    """Vidur's attention.csv has q and KV heads of standard attention: no MLA latent, no window."""
    assert main(["--model", "deepseek-v3", "--device", "h100-sxm", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --model: deepseek-v3 has MLA attention")
