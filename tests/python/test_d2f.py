"""engine.generate(..., d2f=True): D2F decoding through Python agrees with `mosaic generate --d2f`,
its steps are its cap, and its options are refused where they do not apply
(docs/design/d2f-decoding.md)."""

import pytest

import mosaic

D2F = dict(gen_length=16, block_length=8, d2f=True, skip_threshold=0.05, block_add_threshold=0.25,
           decoded_token_threshold=0.5)


@pytest.mark.parametrize("model", ["llada_text", "dream_text"])
def test_d2f_agrees_with_the_cli(model, models, engines, cli):
    result = engines[model].generate("Once upon", **D2F)
    want = cli.json("generate", "--model", models[model], "--prompt", "Once upon", "--gen-length", 16,
                    "--block-length", 8, "--d2f", "--skip-threshold", 0.05, "--block-add-threshold", 0.25,
                    "--decoded-token-threshold", 0.5, "--quiet")["results"][0]
    assert result.output_ids == want["output_ids"]
    assert result.steps == want["steps"] == result.forwards + 1  # the loop's last step runs no forward
    assert result.cache == "block"


def test_d2f_steps_cap_the_loop(engines):
    result = engines["llada_text"].generate("Once upon", gen_length=16, block_length=8, d2f=True, steps=3)
    assert result.steps == 3
    assert result.forwards == 3


@pytest.mark.parametrize("sampling, error, match", [
    (dict(skip_threshold=0.5), ValueError, "pass d2f=True"),
    (dict(d2f=True, threshold=0.9), mosaic.Error, "own acceptance rule"),
    (dict(d2f=True, cache="prefix"), mosaic.Error, "exact block cache"),
    (dict(d2f=True, decoded_token_threshold=-0.1), mosaic.Error, r"decoded_token_threshold must be in \[0, 1\]"),
    (dict(d2f=1), TypeError, "True or False"),
])
def test_d2f_refusals_name_the_option(engines, sampling, error, match):
    with pytest.raises(error, match=match):
        engines["llada_text"].generate("x", gen_length=16, **sampling)
