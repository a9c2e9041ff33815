"""A byte-level tokenizer built locally with the ``tokenizers`` library (nothing downloaded).

Ids 0-2 are ``<unk>``, ``<s>`` and ``</s>``; ids 3-258 are the 256 bytes in GPT-2's byte-level
alphabet (every text has an encoding, and every byte string decodes); the remaining ids up to
the model's vocabulary are reserved special tokens (``<|reserved_N|>``), as real checkpoints
pad their vocabularies. There are no merges, so nothing is trained and the files depend only
on the vocabulary size: byte-identical for every seed and every run.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
BYTE_TOKENS = 256
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + BYTE_TOKENS


def write_tokenizer(directory: Path, vocab_size: int, *, max_length: int) -> None:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for a model of ``vocab_size``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"a byte-level tokenizer needs a vocabulary of {MIN_VOCAB_SIZE}+")
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab: dict[str, int] = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({char: len(SPECIAL_TOKENS) + i for i, char in enumerate(alphabet)})
    reserved = [f"<|reserved_{i}|>" for i in range(vocab_size - len(vocab))]
    vocab.update({token: len(vocab) + i for i, token in enumerate(reserved)})

    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    # Llama tokenizers prepend <s>; prompts given as token ids are passed through untouched.
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    tokenizer.add_special_tokens([*SPECIAL_TOKENS, *reserved])
    # Tokenizer.save writes a pretty-printed JSON whose key order is fixed by the library.
    tokenizer.save(str(directory / "tokenizer.json"), pretty=True)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "</s>",
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
    }
    (directory / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2) + "\n", encoding="utf-8"
    )
