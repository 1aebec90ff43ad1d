"""Batches shared by every model of a run: a dictionary, synthetic training batches (translation
pairs, language-model blocks), a generation batch of real sentences and language-model prompts from
the bundled corpus (synthetic when it is absent)."""

from __future__ import annotations

import collections
import gzip
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Tuple

import torch
from fairseq.data import Dictionary
from torch import Tensor

from benchmarks.settings import Settings

TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> List[str]:
    """Lower-cased words and punctuation marks."""
    return TOKEN.findall(text.lower())


def _corpus_rows(path: str) -> Iterator[Tuple[str, str]]:
    """(English, Spanish) of each line of a ``ref en es`` TSV file."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header = next(lines).rstrip("\n").split("\t")
        if header != ["ref", "en", "es"]:
            raise ValueError(f"{path}: expected the header 'ref<TAB>en<TAB>es', got {header}")
        for line in lines:
            _, en, es = line.rstrip("\n").split("\t")
            yield en, es


def has_corpus(data_dir: str) -> bool:
    return all(os.path.isfile(os.path.join(data_dir, f"{s}.tsv.gz")) for s in ("train", "test"))


def build_dictionary(settings: Settings) -> Tuple[Dictionary, str]:
    """The joint dictionary of ``settings.vocab`` symbols (specials included), and its origin.

    From the corpus: its most frequent training words of both languages; otherwise w0, w1, ….
    """
    d = Dictionary()
    room = settings.vocab - d.nspecial
    if has_corpus(settings.data_dir):
        counts: Dict[str, int] = collections.Counter()
        for en, es in _corpus_rows(os.path.join(settings.data_dir, "train.tsv.gz")):
            counts.update(tokenize(en))
            counts.update(tokenize(es))
        for word, _ in counts.most_common(room):
            d.add_symbol(word)
        origin = f"corpus {settings.data_dir} (train words, {len(d)} symbols)"
    else:
        for i in range(room):
            d.add_symbol(f"w{i}")
        origin = f"synthetic ({len(d)} symbols)"
    return d, origin


@dataclass
class TrainingBatch:
    """One padded batch as fairseq's translation task builds it."""

    src_tokens: Tensor  # (B, S), left-padded, ends with EOS
    src_lengths: Tensor  # (B,)
    prev_output_tokens: Tensor  # (B, T), right-padded, starts with EOS
    target: Tensor  # (B, T), right-padded, ends with EOS
    pad: int

    @property
    def target_tokens(self) -> int:
        return int(self.target.ne(self.pad).sum())

    @property
    def source_tokens(self) -> int:
        return int(self.src_lengths.sum())

    @property
    def net_input(self) -> Dict[str, Tensor]:
        return dict(
            src_tokens=self.src_tokens, src_lengths=self.src_lengths, prev_output_tokens=self.prev_output_tokens
        )

    def to(self, device: torch.device) -> "TrainingBatch":
        return TrainingBatch(
            self.src_tokens.to(device),
            self.src_lengths.to(device),
            self.prev_output_tokens.to(device),
            self.target.to(device),
            self.pad,
        )


def _left_padded(sentences: List[Tensor], d: Dictionary) -> Tuple[Tensor, Tensor]:
    """Sentences + EOS, left-padded to the longest; and their lengths (EOS included)."""
    lengths = torch.tensor([len(s) + 1 for s in sentences])
    tokens = torch.full((len(sentences), int(lengths.max())), d.pad())
    for i, s in enumerate(sentences):
        tokens[i, tokens.size(1) - len(s) - 1 :] = torch.cat([s, torch.tensor([d.eos()])])
    return tokens, lengths


def synthetic_batch(d: Dictionary, sentences: int, max_len: int, seed: int) -> TrainingBatch:
    """``sentences`` random pairs with lengths uniform in [3/4·max_len, max_len] (EOS included)."""
    g = torch.Generator().manual_seed(seed)
    low = max(1, (3 * max_len) // 4)

    def words() -> Tensor:
        n = int(torch.randint(low, max_len + 1, (1,), generator=g)) - 1
        return torch.randint(d.nspecial, len(d), (max(n, 1),), generator=g)

    src_tokens, src_lengths = _left_padded([words() for _ in range(sentences)], d)
    targets = [words() for _ in range(sentences)]
    longest = max(len(t) for t in targets) + 1
    prev = torch.full((sentences, longest), d.pad())
    target = torch.full((sentences, longest), d.pad())
    for i, t in enumerate(targets):
        prev[i, : len(t) + 1] = torch.cat([torch.tensor([d.eos()]), t])
        target[i, : len(t) + 1] = torch.cat([t, torch.tensor([d.eos()])])
    return TrainingBatch(src_tokens, src_lengths, prev, target, d.pad())


def generation_sample(d: Dictionary, settings: Settings) -> Tuple[Dict, str]:
    """A SequenceGenerator sample of ``gen_sentences`` sources and a description of them.

    Real sentences: the first test verses with at most ``gen_max_len`` tokens (EOS included),
    encoded with ``d`` (rare words become <unk>). Without the corpus: random sentences.
    """
    limit = settings.gen_max_len
    if has_corpus(settings.data_dir):
        chosen: List[Tensor] = []
        for en, _ in _corpus_rows(os.path.join(settings.data_dir, "test.tsv.gz")):
            words = tokenize(en)
            if len(words) + 1 <= limit:
                chosen.append(torch.tensor([d.index(w) for w in words]))
            if len(chosen) == settings.gen_sentences:
                break
        if len(chosen) < settings.gen_sentences:
            raise ValueError(
                f"only {len(chosen)} test verses have <= {limit} tokens; lower --gen-sentences or raise --gen-max-len"
            )
        src_tokens, src_lengths = _left_padded(chosen, d)
        origin = "test verses of the bundled corpus"
    else:
        batch = synthetic_batch(d, settings.gen_sentences, limit, settings.seed + 1)
        src_tokens, src_lengths = batch.src_tokens, batch.src_lengths
        origin = "synthetic sentences (no bundled corpus found)"
    sample = {"net_input": {"src_tokens": src_tokens, "src_lengths": src_lengths}}
    description = (
        f"{origin}: {len(src_lengths)} sentences, {int(src_lengths.sum())} source "
        f"tokens, lengths {int(src_lengths.min())}-{int(src_lengths.max())}"
    )
    return sample, description


@dataclass
class LanguageModelBatch:
    """One batch as fairseq's language_modeling task builds it: blocks of tokens as input, the
    same blocks one token later as targets."""

    src_tokens: Tensor  # (B, T)
    target: Tensor  # (B, T)
    pad: int

    @property
    def net_input(self) -> Dict[str, Tensor]:
        return dict(src_tokens=self.src_tokens)

    @property
    def target_tokens(self) -> int:
        return self.target.numel()

    def to(self, device: torch.device) -> "LanguageModelBatch":
        return LanguageModelBatch(self.src_tokens.to(device), self.target.to(device), self.pad)


def random_words(d: Dictionary, rows: int, length: int, seed: int) -> Tensor:
    """(rows, length) random words of ``d`` (no special symbol)."""
    return torch.randint(d.nspecial, len(d), (rows, length), generator=torch.Generator().manual_seed(seed))


def language_model_batch(d: Dictionary, blocks: int, length: int, seed: int) -> LanguageModelBatch:
    """``blocks`` blocks of ``length`` random words."""
    words = random_words(d, blocks, length + 1, seed)
    return LanguageModelBatch(words[:, :-1].contiguous(), words[:, 1:].contiguous(), d.pad())


def language_model_prompts(d: Dictionary, settings: Settings) -> Tuple[Tensor, str]:
    """(``gen_sentences`` × ``lm_prompt_len`` prompt tokens, a description): the first words of
    the first test verses that have that many, encoded with ``d`` (rare words become <unk>);
    random words without the corpus."""
    count, length = settings.gen_sentences, settings.lm_prompt_len
    if not has_corpus(settings.data_dir):
        return random_words(d, count, length, settings.seed + 1), "random words (no bundled corpus found)"
    prompts: List[List[int]] = []
    for en, _ in _corpus_rows(os.path.join(settings.data_dir, "test.tsv.gz")):
        words = tokenize(en)
        if len(words) >= length:
            prompts.append([d.index(w) for w in words[:length]])
        if len(prompts) == count:
            return torch.tensor(prompts), f"the first {length} words of the first {count} test verses"
    raise ValueError(
        f"only {len(prompts)} test verses have >= {length} words; lower --gen-sentences or --lm-prompt-len"
    )
