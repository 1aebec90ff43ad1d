"""A new vector field is one layer kind: a mixin and one registry line (docs/design.md), and
then a choice of ``--layer-kind``."""

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from fairseq.options import get_training_parser, parse_args_and_arch
from torch import nn

from ode_seq.layers import LAYER_KINDS, EncoderBlock, LayerKind, register_layer_kind
from ode_seq.models import ODETransformerModel
from testkit.by_name import architecture_options
from tests.conftest import TINY, TinyTask
from tests.numerics import assert_computes


@register_layer_kind("bias-free-ffn")
class BiasFreeFeedForward(LayerKind):
    """F with a feed-forward network without biases."""

    def build_fc1(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)

    def build_fc2(self, input_dim, output_dim, q_noise, qn_block_size):
        return nn.Linear(input_dim, output_dim, bias=False)


@pytest.mark.numerics
def test_a_registered_kind_builds_rk4_blocks_of_its_own_field():
    torch.manual_seed(0)
    args = architecture_options("ode_transformer_rk4", layer_kind="bias-free-ffn", **TINY)
    model = ODETransformerModel.build_model(args, TinyTask()).double().eval()
    block = model.encoder.layers[0]
    assert isinstance(block, BiasFreeFeedForward) and isinstance(block, EncoderBlock)
    assert type(model.decoder.layers[0]) is LAYER_KINDS["bias-free-ffn"].decoder
    assert block.fc1.bias is None and block.fc2.bias is None
    layer = TransformerEncoderLayerBase(block.cfg).double().eval()
    layer.load_state_dict(block.state_dict(), strict=False)
    with torch.no_grad():
        layer.fc1.bias.zero_()
        layer.fc2.bias.zero_()
    G = lambda z: layer(z, encoder_padding_mask=None) - z  # noqa: E731
    y = torch.randn(5, 2, 32, dtype=torch.float64)
    k1 = G(y)
    k2 = G(y + k1 / 2)
    k3 = G(y + k2 / 2)
    k4 = G(y + k3)
    assert_computes(block, lambda: block(y), y + (k1 + 2 * k2 + 2 * k3 + k4) / 6)


def test_a_registered_kind_is_a_choice_of_the_command_line():
    argv = ["data-bin", "--arch", "ode_transformer", "--layer-kind", "bias-free-ffn"]
    args = parse_args_and_arch(get_training_parser(), argv)
    assert args.layer_kind == "bias-free-ffn"
