"""A device's link latency (`DeviceSpec.link_latency_s`): paid at every step of a collective where
the catalog has one (a link through host memory, the RTX PRO 6000 pair), else the roofline's one
generic latency a collective. Hand arithmetic on round numbers: a 100 GB/s link at the roofline's
link_efficiency 0.5 moves 50e9 bytes a second; the link latency is 10 us a message.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.catalog.moe_layout import MoeLayout
from sim_core.config.predictor import RooflinePredictorConfig
from sim_core.predictor import operators as ops
from sim_core.predictor.roofline import COLLECTIVE_LATENCY_S, RooflinePredictor, roofs_for

GENERIC = DeviceSpec(name="round", bf16_tflops=100, memory_gib=80, memory_bandwidth_gbps=1000, link_bandwidth_gbps=100)
SLOW_START = GENERIC.model_copy(update={"link_latency_s": 10e-6})
HALF_LINK = RooflinePredictorConfig(link_efficiency=0.5)
# 2 layers, hidden 64, 8 experts of 32, top-2: the exchange's bytes stay small and round
MOE = ModelSpec(name="tiny-moe", num_layers=2, num_q_heads=4, num_kv_heads=4, head_dim=16, embedding_dim=64,
                mlp_hidden_dim=32, vocab_size=100, num_experts=8, num_experts_per_token=2)


def test_a_ring_all_reduce_pays_the_link_latency_at_each_of_its_steps():
    """1 MB over TP 4: each GPU sends and receives 2 x 3/4 MB = 1.5 MB, 30 us at 50e9 B/s, in
    2 x (4 - 1) = 6 steps of 10 us: 90 us. At TP 2: 1 MB, 20 us, 2 steps: 40 us. Without a link
    latency the same bytes take the generic 8 us once: 38 us at TP 4."""
    slow, generic = roofs_for(SLOW_START, HALF_LINK), roofs_for(GENERIC, HALF_LINK)
    assert COLLECTIVE_LATENCY_S == 8e-6
    assert slow.all_reduce(1e6, 4) == pytest.approx(90e-6, rel=1e-12)
    assert slow.all_reduce(1e6, 2) == pytest.approx(40e-6, rel=1e-12)
    assert generic.all_reduce(1e6, 4) == pytest.approx(38e-6, rel=1e-12)


def test_a_send_and_an_exchange_pay_one_latency_a_message_in_sequence():
    """A pipeline send of 1 MB: 20 us + one message, 30 us (generic: 28 us). An exchange of 1 MB
    in 3 ring steps: 20 + 30 = 50 us; in one (an all-to-all's messages leave together): 30 us."""
    slow, generic = roofs_for(SLOW_START, HALF_LINK), roofs_for(GENERIC, HALF_LINK)
    assert slow.send_recv(1e6) == pytest.approx(30e-6, rel=1e-12)
    assert generic.send_recv(1e6) == pytest.approx(28e-6, rel=1e-12)
    assert slow.exchange(1e6, 3) == pytest.approx(50e-6, rel=1e-12)
    assert slow.exchange(1e6) == pytest.approx(30e-6, rel=1e-12)
    assert generic.exchange(1e6, 3) == pytest.approx(28e-6, rel=1e-12)


def test_vllms_gather_goes_round_the_other_dp_ranks_and_an_all_to_all_at_once():
    """allgather_reducescatter over DP 4: 3 steps (DP 2: 1); all-to-all over EP 4: 1."""
    for layout, steps in ((MoeLayout(1, 4, 1), 3), (MoeLayout(1, 2, 2), 1), (MoeLayout(4, 1, 4, all_to_all=True), 1)):
        assert ops.moe_exchange_steps(ops.LayerShape.of(MOE, layout.tp, layout), layout) == steps


def test_a_moe_layers_dispatch_and_combine_pay_the_steps_of_the_gather():
    """DP 4 (allgather_reducescatter), 64 tokens a rank: each GPU receives the other 3 ranks'
    64 x 64 values of 2 bytes, 24,576 bytes, 0.49152 us at 50e9 B/s, in 3 steps of 10 us: 30.49152
    us; dispatch and combine: 60.98304 us a layer. Without the link latency: 2 x 8.49152 us."""
    layout = MoeLayout(1, 4, 1)
    tokens = np.array([64.0])
    slow = RooflinePredictor(MOE, SLOW_START, 1, 1, HALF_LINK, layout=layout).layer_ops(tokens)
    generic = RooflinePredictor(MOE, GENERIC, 1, 1, HALF_LINK, layout=layout).layer_ops(tokens)
    assert slow["moe_dispatch_combine"][0] == pytest.approx(60.98304e-6, rel=1e-12)
    assert generic["moe_dispatch_combine"][0] == pytest.approx(16.98304e-6, rel=1e-12)
