"""An ODE Llama trains the ways transformers' models train: Trainer and accelerate (one process
here, two under torchrun in test_ddp_*), a peft LoRA adapter that merges into the model, gradient
checkpointing per Runge–Kutta stage, bf16 autocast, and safetensors folders that reload with the
same logits."""

import os
import subprocess
import sys

import pytest
import torch
from peft import LoraConfig, get_peft_model

from ode_seq.transformers import ODELlamaForCausalLM
from tests.e2e.cli import ROOT
from tests.numerics import LayerEvaluations, assert_computes, assert_equal_up_to_rounding, assert_same_tensors
from tests.transformers.training_runs import (
    SEQUENCES,
    assert_the_loss_fell,
    loss_on_the_data,
    tiny_model,
    train_with_accelerate,
    train_with_trainer,
)


@pytest.mark.parametrize(
    "arguments", [{}, dict(bf16=True), dict(activation_checkpointing=True)], ids=["float32", "bf16", "checkpointing"]
)
def test_trainer_runs_steps_and_the_loss_falls(tmp_path, arguments):
    """Also with bf16=True (CPU autocast: the logits come out in bfloat16) and with
    activation_checkpointing=True (each block's solver checkpoints its stages)."""
    model = tiny_model()
    before = loss_on_the_data(model)
    dtypes = set()
    hook = model.lm_head.register_forward_hook(lambda module, inputs, output: dtypes.add(output.dtype))
    trainer = train_with_trainer(model, str(tmp_path), **arguments)
    hook.remove()
    assert trainer.state.global_step == 20
    assert_the_loss_fell(before, loss_on_the_data(model))
    assert dtypes == {torch.bfloat16 if "bf16" in arguments else torch.float32}
    checkpointing = "activation_checkpointing" in arguments
    assert [layer.solver.checkpoint_stages for layer in model.model.layers] == [checkpointing] * 2


def test_a_trainer_run_resumed_from_its_checkpoint_ends_with_the_uninterrupted_runs_weights(tmp_path):
    """10 steps with a checkpoint (safetensors, optimizer, RNG states) every 5; resumed from step 5,
    the run ends bitwise where the uninterrupted one did: nothing trained is lost."""
    uninterrupted, resumed = tiny_model(), tiny_model()
    with torch.no_grad():  # other weights: only what the checkpoint holds can make the runs agree
        for p in resumed.parameters():
            p.add_(1.0)
    train_with_trainer(uninterrupted, str(tmp_path / "a"), steps=10, save_strategy="steps", save_steps=5)
    train_with_trainer(resumed, str(tmp_path / "b"), steps=10, resume=str(tmp_path / "a" / "checkpoint-5"))
    expected = dict(uninterrupted.named_parameters())
    assert all(torch.equal(p, expected[name]) for name, p in resumed.named_parameters())


def test_accelerate_trains_it_in_one_process():
    model = tiny_model()
    before = loss_on_the_data(model)
    train_with_accelerate(model)
    assert_the_loss_fell(before, loss_on_the_data(model))


DDP_SCRIPT = os.path.join(ROOT, "tests", "transformers", "ddp_training.py")


def test_ddp_two_cpu_processes_under_torchrun_train_one_model_with_trainer_and_accelerate(tmp_path):
    """DDP over gloo: torchrun starts two processes on the CPU, each trains the same tiny model on
    its half of the data with Trainer, then with an accelerate loop (ddp_training.py); the
    gradients averaged between them leave both with the same weights, and each loss falls.
    (~15 s: two fresh interpreters importing torch and transformers.)"""
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    command = [torchrun, "--standalone", "--nproc_per_node", "2", DDP_SCRIPT, str(tmp_path)]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    for run_name in ("trainer", "accelerate"):
        first, second = (rank[run_name] for rank in ranks)
        for rank in (first, second):
            assert_the_loss_fell(rank["loss_before"], rank["loss_after"])
        assert first["parameters"].keys() == second["parameters"].keys()
        assert all(torch.equal(p, second["parameters"][name]) for name, p in first["parameters"].items()), run_name
        assert not torch.equal(first["parameters"]["lm_head.weight"], tiny_model().lm_head.weight.detach())


LORA = LoraConfig(
    r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], modules_to_save=["combiner"]
)


def test_a_lora_adapter_trains_and_merges_into_a_model_with_the_adapters_logits(tmp_path):
    """LoRA on the attention's q and v, and the stage gates trained whole (``modules_to_save``: what
    an upcycled model's new gates need); the loss falls (a little: the output layer stays frozen);
    the merged model is an ODE Llama again, with the adapter's logits."""
    model = tiny_model()
    frozen = {name: p.detach().clone() for name, p in model.named_parameters()}
    lora = get_peft_model(model, LORA)
    before = loss_on_the_data(lora)
    train_with_trainer(lora, str(tmp_path))
    assert loss_on_the_data(lora) < before
    kinds = (".lora_A.", ".lora_B.", ".combiner.modules_to_save.")
    trained = [name for name, p in lora.named_parameters() if p.requires_grad]
    assert {kind for name in trained for kind in kinds if kind in name} == set(kinds)
    assert all(any(kind in name for kind in kinds) for name in trained)
    lora.eval()
    with torch.no_grad():
        expected = lora(SEQUENCES).logits
        merged = lora.merge_and_unload()
        assert type(merged) is ODELlamaForCausalLM and sorted(merged.state_dict()) == sorted(frozen)
        assert_computes(merged, lambda: merged(SEQUENCES).logits, expected)
    layer = merged.model.layers[0]
    changes = [("self_attn.q_proj.weight", True), ("combiner.proj.weight", True), ("mlp.up_proj.weight", False)]
    for name, changed in changes:
        assert torch.equal(layer.get_parameter(name), frozen[f"model.layers.0.{name}"]) is not changed, name


def gradients(model: ODELlamaForCausalLM) -> dict:
    model.zero_grad()
    model(input_ids=SEQUENCES, labels=SEQUENCES).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def stage_inputs(model: ODELlamaForCausalLM, record: list) -> list:
    """Hooks appending (layer, z) for each field evaluation: z, the stage's input, is what the
    layer's attention branch normalises first."""
    return [
        layer.input_layernorm.register_forward_pre_hook(lambda _, args, i=i: record.append((i, args[0].detach())))
        for i, layer in enumerate(model.model.layers)
    ]


def test_gradient_checkpointing_recomputes_one_stage_at_a_time_and_gives_the_same_gradients():
    """RK4 with learned coefficients: in the backward pass each field evaluation is recomputed from
    its own stored input, the last stage of the last layer first (transformers' checkpointing of
    whole layers would recompute a layer's four stages in order), and the gradients are those
    without checkpointing up to rounding."""
    model = tiny_model(decoder_ode_method="rk4").train()
    with LayerEvaluations(model) as evaluations:
        expected = gradients(model)
    model.activation_checkpointing_enable()
    assert model.is_activation_checkpointing
    forward, backward = [], []
    hooks = stage_inputs(model, forward)
    loss = model(input_ids=SEQUENCES, labels=SEQUENCES).loss
    hooks = [hook.remove() for hook in hooks] and stage_inputs(model, backward)
    model.zero_grad()
    loss.backward()
    for hook in hooks:
        hook.remove()
    order = [next(j for j, (f, z_f) in enumerate(forward) if f == b and torch.equal(z_f, z_b)) for b, z_b in backward]
    assert len(forward) == 8 and order == list(reversed(range(8)))
    actual = {name: p.grad for name, p in model.named_parameters()}
    assert_same_tensors(actual, expected, 2 * evaluations.count)


def test_bf16_autocast_gives_a_finite_loss_and_finite_gradients_near_float32s():
    model = tiny_model().train()
    with LayerEvaluations(model) as evaluations:
        expected = model(input_ids=SEQUENCES, labels=SEQUENCES).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=SEQUENCES, labels=SEQUENCES)
    out.loss.backward()
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert_equal_up_to_rounding(out.loss.detach(), expected.detach(), evaluations.count, torch.bfloat16)


@pytest.mark.parametrize("coefficients", ["fixed", "learned"])
def test_save_pretrained_writes_safetensors_that_reload_with_the_same_logits(tmp_path, coefficients):
    """Bitwise for fixed coefficients; up to rounding for learned ones, whose gates compute
    Σ_i W_i k_i over slices of one weight: measured, the reloaded copy's gates differ in the last
    bits (test_ode_llama.py, upcycled model)."""
    model = tiny_model(ode_coefficients=coefficients).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.bin"))
    reloaded = ODELlamaForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        expected = model(SEQUENCES).logits
        if coefficients == "fixed":
            assert torch.equal(reloaded(SEQUENCES).logits, expected)
        else:
            assert_computes(reloaded, lambda: reloaded(SEQUENCES).logits, expected)
