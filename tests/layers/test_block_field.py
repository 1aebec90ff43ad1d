"""A block makes the sublayers of its field once per solve, unless they change between stage
evaluations: the time-dependent kind's weights θ(t), a decoder's per-stage caches."""

from typing import List

import pytest
import torch

from ode_seq.layers import ode_blocks
from tests.conftest import TinyTask, build_model
from tests.test_nonautonomous import _tiny


def count_sublayers(block) -> List[int]:
    """Counts (in the returned list's one entry) the calls of the block's ``sublayers_of``."""
    made = [0]
    sublayers_of = block.sublayers_of

    def counting(*args, **kwargs):
        made[0] += 1
        return sublayers_of(*args, **kwargs)

    block.sublayers_of = counting
    return made


@pytest.mark.parametrize(
    "arch, options, per_solve",
    [
        ("ode_transformer_rk4", {}, 1),
        ("ode_transformer_rk4", dict(ode_scope="sublayer"), 1),
        ("ode_transformer_nonauto_small", dict(encoder_ode_method="rk4", encoder_ode_steps=2, **_tiny()), 8),
    ],
)
def test_an_encoder_block_makes_its_sublayers_once_unless_its_weights_depend_on_time(arch, options, per_solve):
    model = build_model(arch, TinyTask(), **options).eval()
    block = ode_blocks(model.encoder)[0]
    made = count_sublayers(block)
    with torch.no_grad():
        block(torch.randn(5, 2, 32), None)
    assert made == [per_solve]


def test_a_decoder_block_makes_its_sublayers_once_per_solve_and_per_stage_with_caches():
    model = build_model("ode_transformer_rk4_encdec", TinyTask()).eval()
    block = ode_blocks(model.decoder)[0]
    memory = torch.randn(4, 2, 32)
    made = count_sublayers(block)
    with torch.no_grad():
        block(torch.randn(3, 2, 32), memory, None)
        assert made == [1]
        block(torch.randn(1, 2, 32), memory, None, incremental_state={})
    assert made == [1 + 4]
