"""Weight spectra of constructed matrices with known eigenvalues, and of fairseq modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fairseq.modules.multihead_attention import MultiheadAttention

from ode_seq.analysis.layer_weights import attention_weights, stack_weights
from ode_seq.analysis.spectra import (
    AttentionWeights,
    FeedForwardWeights,
    feed_forward_eigenvalues,
    layer_spectra,
    product_eigenvalues,
    query_key_eigenvalues,
    value_output_eigenvalues,
)
from tests.conftest import build_model
from tests.numerics import assert_equal_up_to_rounding

G = torch.Generator().manual_seed(0)


def _real_matrix_with_eigenvalues(eigenvalues) -> tuple:
    """P · blockdiag(real 2×2 rotation-scale blocks for complex pairs, reals) · P⁻¹."""
    blocks, values = [], []
    for v in eigenvalues:
        if isinstance(v, complex):
            blocks.append(torch.tensor([[v.real, -v.imag], [v.imag, v.real]], dtype=torch.float64))
            values += [v, v.conjugate()]
        else:
            blocks.append(torch.tensor([[float(v)]], dtype=torch.float64))
            values.append(complex(v))
    core = torch.block_diag(*blocks)
    p = torch.randn(core.shape[0], core.shape[0], generator=G, dtype=torch.float64) + 3 * torch.eye(
        core.shape[0], dtype=torch.float64
    )
    return p @ core @ torch.linalg.inv(p), np.array(values)


def _sorted(values: np.ndarray) -> np.ndarray:
    return values[np.lexsort((-values.imag, -values.real))]


def _orthonormal_columns(rows: int, cols: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(rows, cols, generator=G, dtype=torch.float64))
    return q


HEAD_SPECTRA = [[complex(0.5, 1.5), -0.7, 2.0], [complex(-1.0, 0.25), 0.3, 0.9]]  # d_h = 4


def test_query_key_spectrum_per_head_equals_constructed_eigenvalues():
    d, heads, scaling = 12, 2, 0.5
    w_q, w_k = torch.zeros(d, 8, dtype=torch.float64), torch.zeros(d, 8, dtype=torch.float64)
    expected = []
    for h, spectrum in enumerate(HEAD_SPECTRA):
        core, values = _real_matrix_with_eigenvalues(spectrum)
        u = _orthonormal_columns(d, 4)
        w_k[:, 4 * h : 4 * h + 4] = u
        w_q[:, 4 * h : 4 * h + 4] = u @ core / scaling  # s · W_Q W_Kᵀ = U C Uᵀ
        expected.append(_sorted(values))
    attn = AttentionWeights(w_q, w_k, w_k, w_k.T, heads=heads, scaling=scaling)
    for got, want in zip(query_key_eigenvalues(attn), expected):
        np.testing.assert_allclose(got, want, atol=1e-9)
    # The d × d product has the same non-zero eigenvalues and d − d_h zeros.
    full = np.linalg.eigvals((w_q[:, :4] * scaling @ w_k[:, :4].T).numpy())
    nonzero = full[np.abs(full) > 1e-9]
    np.testing.assert_allclose(_sorted(nonzero), expected[0], atol=1e-9)
    assert (np.abs(full) <= 1e-9).sum() == d - 4


def test_value_output_spectrum_per_head_equals_constructed_eigenvalues():
    d = 10
    w_v, w_o = torch.zeros(d, 8, dtype=torch.float64), torch.zeros(8, d, dtype=torch.float64)
    expected = []
    for h, spectrum in enumerate(HEAD_SPECTRA):
        core, values = _real_matrix_with_eigenvalues(spectrum)
        u = _orthonormal_columns(d, 4)
        w_v[:, 4 * h : 4 * h + 4] = u @ core
        w_o[4 * h : 4 * h + 4, :] = torch.linalg.pinv(u)  # W_V W_O = U C U⁺
        expected.append(_sorted(values))
    attn = AttentionWeights(w_v, w_v, w_v, w_o, heads=2)
    for got, want in zip(value_output_eigenvalues(attn), expected):
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_feed_forward_spectrum_equals_constructed_eigenvalues():
    d, d_ff = 5, 13
    core, values = _real_matrix_with_eigenvalues([complex(0.2, -0.8), 1.1, -0.4, 0.05])
    expand = torch.randn(d, d_ff, generator=G, dtype=torch.float64)  # full row rank
    ffn = FeedForwardWeights(w_1=core @ expand, w_2=torch.linalg.pinv(expand))
    np.testing.assert_allclose(feed_forward_eigenvalues(ffn), _sorted(values), atol=1e-9)


@pytest.mark.numerics
def test_extracted_matrices_reproduce_fairseq_attention_logits():
    """s · (x W_Q^h)(y W_K^h)ᵀ equals the module's head-h logit q_h · k_h (biases zeroed)."""
    attn = MultiheadAttention(8, 2, self_attention=True).double()
    with torch.no_grad():  # the bilinear form has no biases
        attn.q_proj.bias.zero_()
        attn.k_proj.bias.zero_()
    weights = attention_weights(attn)
    x, y = torch.randn(8, generator=G, dtype=torch.float64), torch.randn(8, generator=G, dtype=torch.float64)
    q, k = attn.q_proj(x) * attn.scaling, attn.k_proj(y)
    for h in range(2):
        bilinear = weights.w_q[:, weights.head(h)] @ weights.w_k[:, weights.head(h)].T
        logit = q[4 * h : 4 * h + 4] @ k[4 * h : 4 * h + 4]
        # both sides sum the terms x_i W_Q[i, a] W_K[j, a] y_j s: their rounding is relative to Σ |terms|
        magnitude = x.abs() @ weights.w_q[:, weights.head(h)].abs() @ weights.w_k[:, weights.head(h)].abs().T
        magnitude = magnitude @ y.abs() * weights.scaling
        assert_equal_up_to_rounding(x @ bilinear @ y * weights.scaling, logit, 1, magnitude=magnitude)


def test_model_spectra_have_one_entry_per_layer_and_cross_attention_only_in_decoder(task):
    model = build_model("ode_transformer_rk2_learned", task)
    encoder = [layer_spectra(w) for w in stack_weights(model.encoder)]
    decoder = [layer_spectra(w) for w in stack_weights(model.decoder)]
    assert [s["depth"] for s in encoder] == [0.0, 1.0] and len(decoder) == 2
    assert "cross_qk" not in encoder[0] and "cross_vo" in decoder[1]
    assert len(decoder[0]["cross_qk"]) == 4 and decoder[0]["cross_qk"][0].shape == (8,)
    assert encoder[0]["ffn"].shape == (32,) and np.iscomplexobj(encoder[0]["ffn"])


def test_product_of_mismatched_shapes_is_refused():
    message = r"L of shape n×m and R of shape m×n, got \(3, 2\) and \(3, 3\)"
    with pytest.raises(ValueError, match=message):
        product_eigenvalues(torch.zeros(3, 2), torch.zeros(3, 3))
