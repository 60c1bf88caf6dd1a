"""engine.generate(..., suffix=...): infilling agrees with `mosaic generate --suffix` and is refused
where it cannot work (docs/design/infilling.md)."""

import pytest

import mosaic


@pytest.mark.parametrize("model", ["llada_text", "dream_text"])
def test_suffix_agrees_with_the_cli(model, models, engines, cli):
    result = engines[model].generate("Once upon", suffix=" the end.", gen_length=8, steps=8)
    want = cli.json("generate", "--model", models[model], "--prompt", "Once upon", "--suffix", " the end.",
                    "--gen-length", 8, "--steps", 8, "--quiet")["results"][0]
    assert result.output_ids == want["output_ids"]
    assert len(result.output_ids) == 8  # the span, not the suffix
    ids = engines[model].encode(" the end.")
    assert engines[model].generate("Once upon", suffix=ids, gen_length=8, steps=8).output_ids == want["output_ids"]


def test_suffix_refused_with_a_cache(engines):
    with pytest.raises(mosaic.Error, match="without a KV cache"):
        engines["llada_text"].generate("x", suffix="y", gen_length=8, steps=8, block_length=4, cache="dual")
