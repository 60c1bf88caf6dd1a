"""A small byte-level BPE tokenizer.json written from scratch (GPT-2 byte alphabet, a few merges,
the special tokens of LLaDA's chat format and a mask token), so text tests need no download.
Ids are contiguous: a checkpoint with vocab = TOKENIZER_SIZE never generates an id the
tokenizer cannot decode."""

import json

_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("Ġ", "s")]
SPECIAL_TOKENS = ["<|endoftext|>", "<|startoftext|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|mdm_mask|>"]


def _bytes_to_unicode():
    """GPT-2's printable stand-in for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def tokenizer_json():
    vocab = {char: i for i, char in enumerate(_bytes_to_unicode())}
    for left, right in _MERGES:
        vocab[left + right] = len(vocab)
    added = []
    for token in SPECIAL_TOKENS:
        added.append({"id": len(vocab) + len(added), "content": token, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{left} {right}" for left, right in _MERGES]},
    }


TOKENIZER_SIZE = 256 + len(_MERGES) + len(SPECIAL_TOKENS)


def write_tokenizer(path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False)
    return path
