"""A saved ODE Llama folder carries its code (ode_seq.code_folder): it loads with
``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` in a Python where ode-seq
cannot be imported, computes the saved model's logits there, and saves again with its code."""

import ast
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch

from ode_seq.code_folder import PACKAGE, flat_source
from ode_seq.export.remote_folder import CARRIED
from ode_seq.transformers import ODELlamaForCausalLM
from tests.numerics import LayerEvaluations, assert_equal_up_to_rounding
from tests.transformers.training_runs import SEQUENCES, tiny_model, train_with_trainer

# Run with `python -I -S`: no PYTHONPATH, no current directory, no site-packages processing (so no
# editable install of ode-seq); the site-packages directory is appended by hand.
ISOLATED = textwrap.dedent(
    """
    import sys
    site, folder, tokens, output, resaved = sys.argv[1:]
    sys.path.append(site)
    try:
        import ode_seq
    except ImportError:
        pass
    else:
        raise SystemExit(f"ode_seq is importable here: {ode_seq.__file__}")
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(torch.load(tokens)).logits
    torch.save(dict(module=type(model).__module__, logits=logits), output)
    model.save_pretrained(resaved)
    """
)


def code(folder) -> dict:
    return {name: (folder / name).read_text(encoding="utf-8") for name in os.listdir(folder) if name.endswith(".py")}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(folder, in-process logits, their layer evaluations, what the isolated Python computed, the
    folder it saved) of an RK2 model with learned coefficients (gate biases made non-zero)."""
    tmp = tmp_path_factory.mktemp("remote")
    model = tiny_model().eval()
    for layer in model.model.layers:
        torch.nn.init.normal_(layer.combiner.proj.bias)
    model.save_pretrained(tmp / "folder")
    torch.save(SEQUENCES, tmp / "tokens.pt")
    with torch.no_grad(), LayerEvaluations(model) as evaluations:
        expected = model(SEQUENCES).logits
    site = sysconfig.get_paths()["purelib"]
    arguments = [site, tmp / "folder", tmp / "tokens.pt", tmp / "isolated.pt", tmp / "resaved"]
    env = dict(os.environ, HF_MODULES_CACHE=str(tmp / "modules"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", ISOLATED, *map(str, arguments)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / "folder", expected, evaluations.count, torch.load(tmp / "isolated.pt"), tmp / "resaved"


def test_the_folder_loads_where_ode_seq_is_not_importable_and_computes_the_same_logits(saved):
    folder, expected, evaluations, isolated, _ = saved
    module = ODELlamaForCausalLM.__module__.rpartition(".")[2]
    assert isolated["module"].startswith("transformers_modules.") and isolated["module"].endswith(f".{module}")
    assert_equal_up_to_rounding(isolated["logits"], expected, evaluations)


def imports_ode_seq(text: str) -> bool:
    nodes = ast.walk(ast.parse(text))
    modules = [node.module or "" for node in nodes if isinstance(node, ast.ImportFrom) and not node.level]
    return any(module.split(".")[0] == "ode_seq" for module in modules)


def package_file(name: str) -> str:
    """The file of ode_seq named ``name``; of two such (``blocks.py`` of fairseq's layers and of
    ode_seq.transformers), the one beside the model's module."""
    paths = [path for path in Path(PACKAGE).rglob(name) if "remote_code" not in path.parts]
    beside = [
        path for path in paths if path.parent == Path(sys.modules[ODELlamaForCausalLM.__module__].__file__).parent
    ]
    (path,) = beside or paths
    return str(path)


def test_the_folders_code_is_ode_seqs_with_its_imports_made_relative(saved):
    """Each file is ode-seq's own, byte for byte but for ``from ode_seq.….module import`` made
    ``from .module import``; the files the export carries (solver core, layer field) among them,
    and ``auto_map`` names the classes in the folder's modules."""
    folder, *_ = saved
    files = code(folder)
    assert {os.path.basename(path) for path in CARRIED} <= files.keys()
    for name, text in files.items():
        assert text == flat_source(package_file(name)) and not imports_ode_seq(text), name
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    assert {auto: reference.rpartition(".")[2] for auto, reference in auto_map.items()} == {
        "AutoConfig": "ODELlamaConfig",
        "AutoModel": "ODELlamaModel",
        "AutoModelForCausalLM": "ODELlamaForCausalLM",
    }
    assert all(f"{reference.rpartition('.')[0]}.py" in files for reference in auto_map.values())


def test_a_model_loaded_from_the_folder_saves_the_same_code_again(saved):
    folder, *_, resaved = saved
    assert code(resaved) == code(folder)


def test_a_trainer_saves_the_model_with_its_code(tmp_path):
    trainer = train_with_trainer(tiny_model(), str(tmp_path / "run"), steps=1)
    trainer.save_model(str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "model.safetensors").is_file()
    module = ODELlamaForCausalLM.__module__.rpartition(".")[2]
    assert code(tmp_path / "saved").keys() >= {f"{module}.py", "fields.py", "stack_solvers.py"}
    assert "auto_map" in json.loads((tmp_path / "saved" / "config.json").read_text())


def test_push_to_hub_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"upload the folder before its code is written: save_pretrained\(folder"):
        tiny_model().save_pretrained(tmp_path / "folder", push_to_hub=True)
    assert not (tmp_path / "folder").exists()
