"""What a checkpoint records about its training data and how other data is told apart
(:mod:`ode_seq.training_data`): symbols in order count, frequencies do not; messages name the
first differing symbol; subword models are checked unit by unit."""

from types import SimpleNamespace
from typing import Sequence

import pytest
from fairseq.data import Dictionary

from ode_seq.training_data.record import (
    DataMismatchError,
    TrainingRecord,
    dictionary_mismatch,
    first_difference,
    read_record,
)
from ode_seq.training_data.subword_models import check_subword_model, subword_nmt_codes


def dictionary(words: Sequence[str], counts: Sequence[int] = ()) -> Dictionary:
    d = Dictionary()
    for word, count in zip(words, counts or [1] * len(words)):
        d.add_symbol(word, n=count)
    return d


def task(source: Dictionary, target: Dictionary, pair=("de", "en")):
    return SimpleNamespace(
        cfg=SimpleNamespace(data="data-bin", source_lang=pair[0], target_lang=pair[1]),
        source_dictionary=source,
        target_dictionary=target,
        run_id="0" * 32,
        started_from=None,
    )


def recorded(source: Dictionary, target: Dictionary) -> TrainingRecord:
    return read_record(TrainingRecord.of(task(source, target)).state())


def test_dictionaries_with_the_same_symbols_but_other_counts_match():
    record = recorded(dictionary(["a", "b"], [5, 3]), dictionary(["x", "y"]))
    assert dictionary_mismatch(record, task(dictionary(["a", "b"], [1, 9]), dictionary(["x", "y"], [2, 2]))) is None


def test_two_symbols_swapped_are_named_with_their_index():
    record = recorded(dictionary(["a", "b", "c"]), dictionary(["x"]))
    error = dictionary_mismatch(record, task(dictionary(["a", "c", "b"]), dictionary(["x"])))
    assert "another source dictionary than data-bin/dict.de.txt: symbol 5 is 'b' in the model's dictionary " in str(
        error
    )
    assert "(both 7 symbols, 2 differ)" in str(error) and str(error).startswith("the checkpoint was trained")
    assert str(error.naming("m.pt")).startswith("m.pt was trained with another source dictionary")


def test_source_and_target_dictionaries_read_the_other_way_round_are_named_as_such():
    record = recorded(dictionary(["a"]), dictionary(["x"]))
    error = dictionary_mismatch(record, task(dictionary(["x"]), dictionary(["a"]), pair=("en", "de")))
    assert "the other way round" in str(error) and "pass -s de -t en" in str(error)


@pytest.mark.parametrize(
    "model, given, expected",
    [
        (
            ["a", "b"],
            ["a", "b", "c"],
            "symbol 2 is past its end in m.pt but 'c' in d.txt (2 symbols in m.pt, 3 in d.txt)",
        ),
        (["a", "c"], ["a", "b"], "symbol 1 is 'c' in m.pt but 'b' in d.txt (both 2 symbols, 1 differ)"),
    ],
)
def test_first_difference_names_index_symbols_and_sizes(model, given, expected):
    assert first_difference(model, "m.pt", given, "d.txt") == expected


def test_a_checkpoint_without_a_record_matches_anything():
    assert dictionary_mismatch(read_record({}), task(dictionary(["a"]), dictionary(["x"]))) is None


def test_subword_nmt_units_are_single_characters_and_merge_results():
    codes = subword_nmt_codes("--bpe-codes c", [("w", "1"), ("w1", "2</w>")], "@@")
    assert [codes.produces(s) for s in ("w1@@", "w12", "w@@", "2", "w12@@", "v1@@")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_a_subword_model_is_refused_at_the_first_symbol_it_cannot_produce_and_tags_are_not_checked():
    codes = subword_nmt_codes("--bpe-codes other.codes", [("w", "1")], "@@")
    words = dictionary(["w1@@", "<2en>", "__de__", "madeupword0000", "w12", "2"])
    with pytest.raises(DataMismatchError, match=r"--bpe-codes other\.codes does not match .* 1 of its 6 symbols .* "):
        check_subword_model(codes, task(words, words))
    check_subword_model(codes, task(dictionary(["w1@@", "<2en>", "2"]), dictionary(["w1@@"])))
