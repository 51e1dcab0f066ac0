"""Predictor figures are built from long tables without Streamlit."""

from sim_core import parse_config
from sim_core.predictor import build_predictor
from sim_core.viz import decode_frame, decode_lines, error_bars, operator_lines, prefill_frame


def test_prefill_frame_has_every_operator_per_size_and_sums_to_stage_time():
    predictor = build_predictor(parse_config({"predictor": {"type": "roofline"}}))
    frame = prefill_frame({"roofline": predictor}, [128, 1024])
    # 10 per-layer operators, prefill and decode attention, emb, lm_head and the 4 CPU phases
    assert frame.groupby("tokens")["operator"].count().tolist() == [18, 18]
    total = frame[frame["tokens"] == 1024]["ms"].sum()
    shape = __import__("sim_core").predictor.BatchShape(1, 1024, ((1024, 0),))
    assert abs(total - predictor.stage_time(shape, 0) * 1e3) < 1e-9
    figure = operator_lines(frame, top=3)
    assert len(figure.data) == 3 and figure.data[0].name.endswith("(roofline)")


def test_decode_lines_one_per_context():
    roofline = build_predictor(parse_config({"predictor": {"type": "roofline"}}))
    frame = decode_frame({"roofline": roofline}, [1, 8, 64], [512, 2048])
    assert len(frame) == 6
    assert (frame[frame["context"] == 2048]["ms"].to_numpy() > frame[frame["context"] == 512]["ms"].to_numpy()).all()
    assert [trace.name for trace in decode_lines(frame).data] == ["512 ctx (roofline)", "2048 ctx (roofline)"]


def test_error_bars():
    figure = error_bars({"learned": {"mlp_up_proj": 2.0}, "roofline": {"mlp_up_proj": 9.0}})
    assert [t.name for t in figure.data] == ["learned", "roofline"]
