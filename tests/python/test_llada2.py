"""LLaDA 2.x through Python: block diffusion and LLaDA 2.1's token editing agree with `mosaic
generate`, and the editing options are refused where they do not apply
(docs/design/block-diffusion.md)."""

import pytest

import mosaic

PROMPT = [5, 9, 13, 2, 7]


@pytest.fixture(scope="module")
def llada2(tmp_path_factory, cli):
    path = tmp_path_factory.mktemp("llada2") / "tiny"
    cli("make-test-model", "--family", "llada2", "--preset", "tiny", "--seed", 7, "--out", path, "--quiet")
    return str(path)


@pytest.mark.parametrize("sampling, flags", [
    (dict(gen_length=16, block_length=8, steps=8, threshold=0.5),
     ["--gen-length", 16, "--block-length", 8, "--steps", 8, "--threshold", 0.5]),
    (dict(gen_length=16, block_length=8, threshold=1.0, editing_threshold=0.0, max_post_steps=4),
     ["--gen-length", 16, "--block-length", 8, "--threshold", 1.0, "--editing-threshold", 0.0,
      "--max-post-steps", 4]),
])
def test_block_diffusion_agrees_with_the_cli(llada2, cli, sampling, flags):
    result = mosaic.Engine(llada2, device="cpu").generate(PROMPT, **sampling)
    want = cli.json("generate", "--model", llada2, "--device", "cpu", "--ids", ",".join(map(str, PROMPT)), *flags,
                    "--quiet")["results"][0]
    assert result.output_ids == want["output_ids"]
    assert result.steps == want["steps"]
    assert result.cache == "block"


def test_editing_takes_more_steps_than_filling(llada2):
    engine = mosaic.Engine(llada2, device="cpu")
    filled = engine.generate(PROMPT, gen_length=16, block_length=8, threshold=1.0)
    edited = engine.generate(PROMPT, gen_length=16, block_length=8, threshold=1.0, editing_threshold=0.0)
    # One token a step over blocks [5, 8), [8, 16), [16, 24): the canvas runs to the grid's end.
    assert filled.steps == 3 + 8 + 8
    assert edited.steps > filled.steps  # post steps while edits happen


@pytest.mark.parametrize("sampling, error, match", [
    (dict(editing_threshold=1.5), mosaic.Error, r"editing_threshold must be in \[0, 1\]"),
    (dict(num_to_transfer=0), mosaic.Error, "num_to_transfer must be at least 1"),
    (dict(cache="dual"), mosaic.Error, "exact block cache"),
    (dict(factor=1.0), mosaic.Error, "factor does not apply"),
])
def test_refusals_name_the_option(llada2, sampling, error, match):
    with pytest.raises(error, match=match):
        mosaic.Engine(llada2, device="cpu").generate(PROMPT, gen_length=16, **sampling)


def test_editing_is_refused_for_other_families(engines):
    with pytest.raises(mosaic.Error, match="token editing is LLaDA 2.1's decoding"):
        engines["llada"].generate([5, 6, 7], gen_length=8, editing_threshold=0.5)
