"""The custom code of a Hugging Face folder (``trust_remote_code=True``), which runs where ode-seq is
not installed: Python files copied side by side into the folder with every ode-seq module they
import, transitively. transformers loads a folder's code as one flat package, so an absolute import
``from ode_seq.a.b import x`` becomes ``from .b import x`` in the copy; relative imports
``from .b import x`` name a file beside the importing one and stay as they are (a file without
ode-seq imports is copied byte for byte). Standard library only: this module is carried too, so a
model loaded from a folder writes its code again when saved.
"""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterable, List

PACKAGE = os.path.dirname(os.path.abspath(__file__))


class NotCarried(ValueError):
    """An import that a flat folder of code cannot hold."""


def _imported_file(path: str, node: ast.ImportFrom) -> str:
    """The file that ``node`` (an import of ``path``) imports from ode-seq, or "" for another library."""
    where = f"{os.path.basename(path)} line {node.lineno}"
    if node.level == 0:
        if node.module is None or node.module.split(".")[0] != "ode_seq":
            return ""
        parts = node.module.split(".")[1:]
        source = os.path.join(PACKAGE, *parts) + ".py"
        if not parts or not os.path.isfile(source):
            raise NotCarried(f"{where}: from {node.module} import …: import from ode-seq's modules, not its packages")
        return source
    if node.level != 1 or node.module is None or "." in node.module:
        raise NotCarried(f"{where}: import from the module beside the file (from .module import …) or from ode_seq.…")
    return os.path.join(os.path.dirname(path), node.module + ".py")


def _imports(path: str) -> List[ast.ImportFrom]:
    """The ``from … import`` statements of ``path``; ``import ode_seq…`` is refused."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "ode_seq" for alias in node.names):
            raise NotCarried(f"{os.path.basename(path)} line {node.lineno}: write from ode_seq.module import …")
    return [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


def code_files(entries: Iterable[str]) -> Dict[str, str]:
    """{name in the folder: source file} of the files ``entries`` and of every ode-seq module they
    import, transitively; two sources of one name are refused."""
    files: Dict[str, str] = {}
    pending = [os.path.abspath(path) for path in entries]
    while pending:
        path = pending.pop()
        name = os.path.basename(path)
        if files.get(name, path) != path:
            raise NotCarried(f"{files[name]} and {path} would both be {name} in the folder: rename one")
        if name in files:
            continue
        files[name] = path
        pending.extend(source for node in _imports(path) if (source := _imported_file(path, node)))
    return files


def flat_source(path: str) -> str:
    """The text of ``path`` with its absolute ode-seq imports made relative (``from .module import``)."""
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    for node in _imports(path):
        if node.level == 0 and _imported_file(path, node):
            line = lines[node.lineno - 1]
            flat = line.replace(f"from {node.module} import", f"from .{node.module.rpartition('.')[2]} import", 1)
            if flat == line:
                raise NotCarried(f"{os.path.basename(path)} line {node.lineno}: write the import on one line")
            lines[node.lineno - 1] = flat
    return "".join(lines)


def copy_code(entries: Iterable[str], folder: str) -> List[str]:
    """Write :func:`code_files` of ``entries`` into ``folder`` (which exists), flattened by
    :func:`flat_source`; returns the names written."""
    files = code_files(entries)
    for name, source in files.items():
        text = flat_source(source)
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return sorted(files)
