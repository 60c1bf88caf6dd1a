"""mosaic.make_test_model: random checkpoints in the real Hugging Face layout (as
`mosaic make-test-model` writes them), for tests and examples without downloading weights."""

import errno
import os

from mosaic import _mosaic


def make_test_model(out, *, family="llada", preset="tiny", tokenizer=None, seed=0, **dimensions):
    """Writes out/config.json and safetensors with random weights, deterministic in `seed`.
    dimensions: layers, hidden, heads, kv_heads, ffn, vocab, rope_theta, tied_embeddings,
    qkv_bias, dtype ("bf16", "fp16", "fp32"), shards. `tokenizer`: a tokenizer.json to copy
    in (the vocabulary grows to cover it). Returns `out`."""
    out = os.fspath(out)
    if tokenizer is not None:
        tokenizer = os.fspath(tokenizer)
        if not os.path.isfile(tokenizer):
            raise FileNotFoundError(errno.ENOENT, "tokenizer.json not found", tokenizer)
    _mosaic.make_test_model(out=out, family=family, preset=preset, tokenizer=tokenizer or "", seed=seed,
                            **dimensions)
    return out
