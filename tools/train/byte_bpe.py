"""Byte-level BPE (GPT-2 style) in plain Python: train, encode, decode, tokenizer.json.

The tokenizer.json written here uses only what Mosaic's C++ tokenizer and Hugging Face
`tokenizers` both read (docs/design/tokenizer.md):

    normalizer      null
    pre_tokenizer   ByteLevel {add_prefix_space: false, use_regex: true}   (GPT-2's regex)
    model           BPE over the 256 byte characters, merges as [["a", "b"], ...]
    post_processor  ByteLevel (adds no ids: no BOS/EOS is ever inserted)
    decoder         ByteLevel
    added_tokens    the special tokens (EOS, mask), normalized=false, special=true

Ids: 0..255 are the bytes (id = byte value), then one id per new merged string in merge
order, then the special tokens last (so the mask id is the largest id, as in
`mosaic make-test-model`).

Encoding a pre-token applies the merges by rank, lowest rank first, leftmost first among
equal ranks: the rule of GPT-2's `bpe()`, of Hugging Face's BPE model and of
src/tokenizer/bpe.cc. Training is the classic count-and-merge loop over the distinct
pre-tokens of the training text, with incremental pair counts; ties between equally
frequent pairs go to the smallest pair (string order), so a run is deterministic.
"""

import heapq
import json
from collections import Counter, defaultdict

# GPT-2's pre-tokenization pattern, which ByteLevel(use_regex=true) applies. \p{L} and
# \p{N} need the `regex` module (Debian: python3-regex; a dependency of transformers).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mdm_mask|>"  # LLaDA-8B's spelling of the mask token
SPECIAL_TOKENS = (EOS_TOKEN, MASK_TOKEN)


def bytes_to_unicode():
    """GPT-2's table byte -> printable character (printable Latin-1 bytes map to themselves,
    the other 68 to U+0100 upwards)."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
            + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def _pretokenizer():
    import regex  # imported here: decoding and loading need no regex module
    return regex.compile(GPT2_PATTERN)


def pretokenize(text, pattern=None):
    """Text -> pre-tokens written in the byte alphabet (what BPE sees)."""
    pattern = pattern or _pretokenizer()
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
            for piece in pattern.findall(text)]


# ----------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------

def train(texts, vocab_size, special_tokens=SPECIAL_TOKENS, min_pair_count=2, progress=None):
    """Learn merges until the vocabulary (bytes + merged strings + special tokens) has
    `vocab_size` entries, or no pair occurs `min_pair_count` times.

    texts: iterable of strings (the training split). Returns a Tokenizer.
    """
    pattern = _pretokenizer()
    word_counts = Counter()
    for text in texts:
        word_counts.update(pretokenize(text, pattern))
    words = [list(w) for w in sorted(word_counts)]  # sorted: deterministic word order
    counts = [word_counts[w] for w in sorted(word_counts)]

    pair_counts = Counter()
    where = defaultdict(set)  # pair -> indices of words that (may) contain it
    for i, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += counts[i]
            where[pair].add(i)
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)

    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    merges = []
    target = vocab_size - len(special_tokens)
    while len(vocab) < target and heap:
        negative, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -negative:
            continue  # stale heap entry
        if -negative < min_pair_count:
            break
        merged = pair[0] + pair[1]
        merges.append(pair)
        if merged not in vocab:
            vocab[merged] = len(vocab)
        changed = set()
        for i in sorted(where.pop(pair)):
            symbols = words[i]
            old_pairs = list(zip(symbols, symbols[1:]))
            if pair not in old_pairs:
                continue
            new_symbols, j = [], 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == pair[0] and symbols[j + 1] == pair[1]:
                    new_symbols.append(merged)
                    j += 2
                else:
                    new_symbols.append(symbols[j])
                    j += 1
            words[i] = new_symbols
            for p in old_pairs:
                pair_counts[p] -= counts[i]
                changed.add(p)
            for p in zip(new_symbols, new_symbols[1:]):
                pair_counts[p] += counts[i]
                where[p].add(i)
                changed.add(p)
        for p in changed:
            c = pair_counts[p]
            if c <= 0:
                del pair_counts[p]
            elif p != pair:
                heapq.heappush(heap, (-c, p))
        pair_counts.pop(pair, None)
        if progress and len(merges) % 500 == 0:
            progress(len(merges), len(vocab))
    for token in special_tokens:
        vocab[token] = len(vocab)
    return Tokenizer(vocab, merges, special_tokens)


# ----------------------------------------------------------------------------------------
# Encoding, decoding, files
# ----------------------------------------------------------------------------------------

class Tokenizer:
    """A trained byte-level BPE: vocab {string: id} (special tokens included), merges."""

    def __init__(self, vocab, merges, special_tokens):
        self.vocab = dict(vocab)
        self.merges = [tuple(m) for m in merges]
        self.special_tokens = tuple(special_tokens)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.ranks = {m: r for r, m in enumerate(self.merges)}
        self._cache = {}
        self._pattern = None

    def __len__(self):
        return max(self.vocab.values()) + 1

    def token_id(self, token):
        return self.vocab[token]

    def _bpe(self, word):
        ids = self._cache.get(word)
        if ids is not None:
            return ids
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p, None), k) for k, p in enumerate(zip(symbols, symbols[1:]))]
            ranked = [(r, k) for r, k in ranked if r is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            a, b = self.merges[best]
            out, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and symbols[k] == a and symbols[k + 1] == b:
                    out.append(a + b)
                    k += 2
                else:
                    out.append(symbols[k])
                    k += 1
            symbols = out
        ids = [self.vocab[s] for s in symbols]
        self._cache[word] = ids
        return ids

    def encode(self, text):
        """Text -> ids. Special-token strings in the text become their ids (as with HF's
        added tokens); nothing is added around the text."""
        if self._pattern is None:
            self._pattern = _pretokenizer()
        ids = []
        for part, is_special in _split_special(text, self.special_tokens):
            if is_special:
                ids.append(self.vocab[part])
            else:
                for word in pretokenize(part, self._pattern):
                    ids.extend(self._bpe(word))
        return ids

    def decode(self, ids, skip_special_tokens=True):
        data = bytearray()
        for i in ids:
            token = self.id_to_token.get(int(i))
            if token is None:
                continue
            if token in self.special_tokens:
                if not skip_special_tokens:
                    data += token.encode("utf-8")
                continue
            data += bytes(CHAR_TO_BYTE[c] for c in token)
        return data.decode("utf-8", errors="replace")

    # -- Hugging Face files ----------------------------------------------------------------

    def to_json(self):
        specials = set(self.special_tokens)
        model_vocab = {t: i for t, i in self.vocab.items() if t not in specials}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": self.vocab[t], "content": t, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": True}
                for t in self.special_tokens],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                               "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": model_vocab, "merges": [list(m) for m in self.merges]},
        }

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            root = json.load(f)
        vocab = dict(root["model"]["vocab"])
        specials = []
        for added in root["added_tokens"]:
            vocab[added["content"]] = added["id"]
            specials.append(added["content"])
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in root["model"]["merges"]]
        return cls(vocab, merges, specials)


def tokenizer_config(model_max_length):
    """tokenizer_config.json for transformers' PreTrainedTokenizerFast."""
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {},  # filled by write_tokenizer_config
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS_TOKEN,
        "mask_token": MASK_TOKEN,
        "model_max_length": model_max_length,
        "pad_token": EOS_TOKEN,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def write_tokenizer_config(tokenizer, path, model_max_length):
    config = tokenizer_config(model_max_length)
    config["added_tokens_decoder"] = {
        str(tokenizer.vocab[t]): {"content": t, "lstrip": False, "normalized": False,
                                  "rstrip": False, "single_word": False, "special": True}
        for t in tokenizer.special_tokens}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def _split_special(text, specials):
    """Yield (piece, is_special): leftmost-longest matches of the special strings."""
    start = 0
    while start < len(text):
        best = None
        for s in specials:
            k = text.find(s, start)
            if k >= 0 and (best is None or k < best[0] or (k == best[0] and len(s) > len(best[1]))):
                best = (k, s)
        if best is None:
            break
        if best[0] > start:
            yield text[start:best[0]], False
        yield best[1], True
        start = best[0] + len(best[1])
    if start < len(text):
        yield text[start:], False
