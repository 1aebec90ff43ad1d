"""Saved folders that load where ode-seq is not installed: ``save_pretrained`` writes, beside
transformers' config and safetensors weights, the model's code (the modules of its classes, with
the ode-seq files they import, flat: :mod:`ode_seq.code_folder`) and the ``auto_map`` of
config.json, so that ``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)``
builds the same model from the folder alone. Where ``ode_seq.transformers`` is imported, the auto
classes take the installed classes instead (without ``trust_remote_code``)."""

import sys
from typing import Any, Dict

from ode_seq.code_folder import copy_code

PUSH_REFUSED = (
    "save_pretrained(push_to_hub=True) would upload the folder before its code is written: "
    "save_pretrained(folder) first, then upload the folder (huggingface_hub.upload_folder)"
)


def class_reference(cls: type) -> str:
    """``module.Class`` as ``auto_map`` names a class of the folder's code."""
    return f"{cls.__module__.rpartition('.')[2]}.{cls.__name__}"


class RemoteCodeSaving:
    """``save_pretrained`` that writes the model's code and ``auto_map`` too (a mixin of a
    ``PreTrainedModel``: ``AutoConfig``, ``AutoModel`` for the base model and
    ``AutoModelForCausalLM`` for a model with a language-model head)."""

    def _auto_classes(self) -> Dict[str, type]:
        classes = {"AutoConfig": type(self.config), "AutoModel": type(self.base_model)}
        if self.base_model is not self:
            classes["AutoModelForCausalLM"] = type(self)
        return classes

    def save_pretrained(self, save_directory: str, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("push_to_hub"):
            raise ValueError(PUSH_REFUSED)
        classes = self._auto_classes()
        self.config.auto_map = {auto: class_reference(cls) for auto, cls in classes.items()}
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):  # the config's module comes as the models' import
            models = (cls for auto, cls in classes.items() if auto != "AutoConfig")
            copy_code({sys.modules[cls.__module__].__file__ for cls in models}, str(save_directory))
