"""A checkpoint that names the DLCL corrector's weights as before they were two DLCL modules (W
``weight``, LN ``prediction_norms``, W' ``corrected_weight``, LN' ``corrected_norms``) loads them."""

import torch

from tests.conftest import TinyTask, build_model

OLD_NAMES = (
    ("corrector_states.prediction.weight", "corrector_states.weight"),
    ("corrector_states.corrected.weight", "corrector_states.corrected_weight"),
    ("corrector_states.prediction.layer_norms.", "corrector_states.prediction_norms."),
    ("corrector_states.corrected.layer_norms.", "corrector_states.corrected_norms."),
)


def with_old_names(key: str) -> str:
    for new, old in OLD_NAMES:
        key = key.replace(new, old)
    return key


def test_a_checkpoint_with_the_old_names_of_the_dlcl_correctors_weights_loads_them():
    trained = build_model("pcformer_small", TinyTask(), encoder_ode_corrector="dlcl")
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if "corrector_states" in name:
                p.add_(torch.randn_like(p))
    state = {with_old_names(key): value for key, value in trained.state_dict().items()}
    assert "encoder.corrector_states.prediction_norms.0.weight" in state
    assert "encoder.corrector_states.corrected_weight" in state
    model = build_model("pcformer_small", TinyTask(), seed=1, encoder_ode_corrector="dlcl")
    model.load_state_dict(state)
    for key, value in trained.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
