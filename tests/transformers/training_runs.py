"""Tiny ODE Llama trainings shared by the in-process tests (test_training.py) and the DDP script
(ddp_training.py): a model that can memorise its data, the data, and short runs of Trainer and of
an accelerate loop."""

from typing import Any, List, Optional

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import PreTrainedModel, Trainer, TrainingArguments, default_data_collator

from ode_seq.transformers import ODELlamaConfig, ODELlamaForCausalLM
from tests.transformers.ode_models import LLAMA_SIZES

CONFIG = dict(
    {name: value for name, value in LLAMA_SIZES.items() if name != "initializer_range"},
    decoder_ode_method="heun",
    ode_coefficients="learned",
    use_cache=False,
)
# Eight random sequences of 16 tokens: memorised within a few dozen steps.
SEQUENCES = torch.randint(0, CONFIG["vocab_size"], (8, 16), generator=torch.Generator().manual_seed(0))
LEARNING_RATE = 1e-2


def tiny_model(**options: Any) -> ODELlamaForCausalLM:
    """RK2 with learned coefficients (CONFIG, updated by ``options``), the same weights on every call."""
    torch.manual_seed(0)
    return ODELlamaForCausalLM(ODELlamaConfig(**{**CONFIG, **options}))


def assert_the_loss_fell(before: float, after: float) -> None:
    """At least a quarter below where it started (from about ln 64 ≈ 4.16, the trainings here reach
    about 2.4)."""
    assert after < 0.75 * before, (before, after)


def examples() -> List[dict]:
    return [dict(input_ids=tokens, labels=tokens) for tokens in SEQUENCES]


def loss_on_the_data(model: PreTrainedModel) -> float:
    """The mean next-token loss of ``model`` on SEQUENCES (eval mode, then back to training)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = model(input_ids=SEQUENCES, labels=SEQUENCES).loss.item()
    model.train(was_training)
    return loss


def train_with_trainer(
    model: PreTrainedModel, output_dir: str, steps: int = 20, resume: Optional[str] = None, **arguments: Any
) -> Trainer:
    """``steps`` steps of Trainer on :func:`examples` (batches of 4, on the CPU, nothing saved
    unless ``arguments`` say), resumed from the checkpoint folder ``resume`` if given."""
    defaults = dict(
        per_device_train_batch_size=4,
        learning_rate=LEARNING_RATE,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    args = TrainingArguments(output_dir=output_dir, max_steps=steps, **{**defaults, **arguments})
    trainer = Trainer(model=model, args=args, train_dataset=examples())
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def train_with_accelerate(model: PreTrainedModel, epochs: int = 10) -> Accelerator:
    """A plain loop over :func:`examples` (batches of 4, AdamW) prepared by accelerate on the CPU."""
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    loader = DataLoader(examples(), batch_size=4, shuffle=True, collate_fn=default_data_collator)
    prepared, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    prepared.train()
    for _ in range(epochs):
        for batch in loader:
            accelerator.backward(prepared(**batch).loss)
            optimizer.step()
            optimizer.zero_grad()
    return accelerator
