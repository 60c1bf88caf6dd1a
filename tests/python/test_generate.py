"""engine.generate: results, batches, the sampling keywords, and agreement with `mosaic generate`."""

import numpy as np
import pytest

import mosaic

# (model, prompts: ids lists or text, CLI options, the same as keywords)
AGREEMENT_CASES = {
    "llada_blocks": ("llada", [[5, 6, 7]], ["--gen-length", 16, "--steps", 8, "--block-length", 8],
                     dict(gen_length=16, steps=8, block_length=8)),
    "llada_sampled_batch": ("llada", [[5, 6, 7], [8], [9, 10, 11, 12, 13]],
                            ["--gen-length", 8, "--steps", 4, "--temperature", 0.8, "--seed", 11,
                             "--remasking", "random"],
                            dict(gen_length=8, steps=4, temperature=0.8, seed=11, remasking="random")),
    "llada_cfg": ("llada", [[5, 6, 7, 8]], ["--gen-length", 8, "--steps", 8, "--cfg-scale", 1.5,
                                            "--logits-eos-inf", "--temperature", 0.5, "--seed", 2],
                  dict(gen_length=8, steps=8, cfg_scale=1.5, logits_eos_inf=True, temperature=0.5, seed=2)),
    "llada_threshold": ("llada", [[5, 6]], ["--gen-length", 16, "--steps", 16, "--threshold", 0.01],
                        dict(gen_length=16, steps=16, threshold=0.01)),
    "dream_entropy": ("dream", [[5, 6, 7], [40, 41]],
                      ["--gen-length", 8, "--steps", 8, "--alg", "entropy", "--temperature", 0.7,
                       "--top-p", 0.9, "--alg-temp", 0.3, "--seed", 5],
                      dict(gen_length=8, steps=8, alg="entropy", temperature=0.7, top_p=0.9, alg_temp=0.3, seed=5)),
    "dream_factor": ("dream", [[5, 6, 7]], ["--gen-length", 8, "--steps", 8, "--alg", "topk_margin",
                                           "--top-k", 5, "--factor", 1.0, "--temperature", 1.0, "--seed", 9],
                     dict(gen_length=8, steps=8, alg="topk_margin", top_k=5, factor=1.0, temperature=1.0, seed=9)),
    "llada_chat_text": ("llada_text", ["the answer is", "in short"],
                        ["--chat", "--gen-length", 8, "--steps", 4, "--temperature", 0.9, "--seed", 4],
                        dict(chat=True, gen_length=8, steps=4, temperature=0.9, seed=4)),
    "dream_text_eos": ("dream_text", ["on the shelf"], ["--gen-length", 8, "--steps", 8, "--stop-at-eos"],
                       dict(gen_length=8, steps=8, stop_at_eos=True)),
    "llada_dual_cache": ("llada", [[5, 6, 7], [8, 9]],
                         ["--gen-length", 16, "--steps", 16, "--block-length", 4, "--cache", "dual"],
                         dict(gen_length=16, steps=16, block_length=4, cache="dual")),
    "dream_prefix_cache": ("dream", [[5, 6, 7]], ["--gen-length", 8, "--steps", 8, "--block-length", 4,
                                                  "--cache", "prefix", "--alg", "entropy"],
                           dict(gen_length=8, steps=8, block_length=4, cache="prefix", alg="entropy")),
}


@pytest.mark.parametrize("case", sorted(AGREEMENT_CASES))
def test_agrees_with_the_cli(case, models, engines, cli):
    model, prompts, cli_options, keywords = AGREEMENT_CASES[case]
    prompt_args = []
    for prompt in prompts:
        prompt_args += ["--prompt", prompt] if isinstance(prompt, str) else ["--ids", ",".join(map(str, prompt))]
    expected = cli.json("generate", "--model", models[model], "--device", "cpu", "--quiet", *prompt_args,
                        *cli_options)["results"]
    results = engines[model].generate(prompts, **keywords)
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        for field in ("prompt_ids", "output_ids", "text", "steps", "forwards", "stopped_at_eos", "tokens_per_step",
                      "cache"):
            assert getattr(got, field) == want[field], field


def test_result_fields(engines):
    result = engines["llada"].generate([5, 6, 7], gen_length=8, steps=4)
    assert isinstance(result, mosaic.GenerationResult)
    assert result.prompt_ids == [5, 6, 7]
    assert len(result.output_ids) == 8 and 1000 not in result.output_ids
    assert result.steps == 4 and result.forwards == 4
    assert sum(result.tokens_per_step) == 8
    assert result.seconds > 0
    assert result.activation_peak_bytes > 0
    # On the CPU a forward is all host time: the host part is the forwards' whole wall time.
    assert 0 < result.forward_seconds <= result.seconds
    assert 0 < result.forward_host_seconds <= result.forward_seconds
    assert not result.cancelled
    assert result.to_dict()["output_ids"] == result.output_ids


def test_prompt_forms_give_the_same_result(engines):
    engine = engines["llada"]
    options = dict(gen_length=8, steps=4, temperature=1.0, seed=3)
    as_list = engine.generate([5, 6, 7], **options)
    for form in ((5, 6, 7), np.array([5, 6, 7], dtype=np.int64), [np.int32(5), np.int32(6), np.int32(7)]):
        assert engine.generate(form, **options).output_ids == as_list.output_ids
    batch = engine.generate(np.array([[5, 6, 7], [5, 6, 7]]), **options)
    assert [r.output_ids for r in batch] == [as_list.output_ids] * 2


def test_text_and_ids_prompts_agree(engines):
    engine = engines["llada_text"]
    by_text = engine.generate("the theory", gen_length=8, steps=8)
    by_ids = engine.generate(engine.encode("the theory"), gen_length=8, steps=8)
    assert by_text.output_ids == by_ids.output_ids and by_text.text == by_ids.text
    mixed = engine.generate(["the theory", engine.encode("the theory")], gen_length=8, steps=8)
    assert mixed[0].output_ids == mixed[1].output_ids == by_text.output_ids


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(temprature=0.5), TypeError, "unexpected keyword argument 'temprature' (did you mean 'temperature'?)"),
    (dict(gen_length=8.5), TypeError, "gen_length must be an int, got float 8.5"),
    (dict(gen_length=True), TypeError, "gen_length must be an int, got bool"),
    (dict(temperature="hot"), TypeError, "temperature must be a number, got str"),
    (dict(logits_eos_inf=1), TypeError, "logits_eos_inf must be True or False"),
    (dict(remasking="sometimes"), ValueError, "remasking must be one of 'low_confidence', 'random', got 'sometimes'"),
    (dict(alg=3), TypeError, "alg must be a string"),
    (dict(seed=-1), ValueError, "seed must be an int in [0, 2**64)"),
    (dict(gen_length=16, block_length=5), mosaic.Error, "gen_length 16 is not a multiple of block_length 5"),
    (dict(gen_length=16, block_length=4, steps=6), mosaic.Error, "steps 6 is not divisible by the number of blocks 4"),
    (dict(alg="entropy"), mosaic.Error, "apply to Dream models, not LLaDA"),
    (dict(temperature=-1), mosaic.Error, "temperature must be a finite number >= 0"),
    (dict(threshold=0.5, factor=1.0), mosaic.Error, "either threshold or factor"),
    (dict(cache="prefix", cfg_scale=1.0), mosaic.Error, "cache prefix cannot run cfg_scale 1"),
    (dict(cache="fast"), ValueError, "cache must be one of"),
])
def test_bad_sampling_options(engines, keywords, error, fragment):
    with pytest.raises(error) as raised:
        engines["llada"].generate([5, 6, 7], **keywords)
    assert fragment in str(raised.value)


@pytest.mark.parametrize("prompt, error, fragment", [
    ([], ValueError, "the list is empty"),
    ("", ValueError, "prompt is empty"),
    ([[5, 6], []], ValueError, "prompt 1 is empty"),
    ([5, 2**40], ValueError, "outside the int32 range"),
    ([5, 9999], mosaic.Error, "prompt token id 9999 is outside the vocabulary"),
    ([[5, 6], 3.5], TypeError, "prompt 1: expected text (str) or token ids"),
    ([5.0, 6.0], TypeError, "expected text (str) or token ids"),
    (b"bytes", TypeError, "prompt must be text"),
    (np.zeros((2, 2, 2), dtype=np.int32), ValueError, "must be 1-D (one prompt) or 2-D (a batch)"),
    (np.array([1.5, 2.5]), TypeError, "expected integers, got an array of float64"),
])
def test_bad_prompts(engines, prompt, error, fragment):
    with pytest.raises(error) as raised:
        engines["llada"].generate(prompt, gen_length=8, steps=8)
    assert fragment in str(raised.value)


def test_text_needs_a_tokenizer_and_chat_needs_text(engines):
    with pytest.raises(mosaic.Error, match="no tokenizer.json in the model folder"):
        engines["llada"].generate("hello", gen_length=8, steps=8)
    with pytest.raises(ValueError, match="chat=True applies to text"):
        engines["llada_text"].generate([5, 6], chat=True, gen_length=8, steps=8)


def test_context_length(engines):
    engine = engines["llada"]  # trained context 4096
    with pytest.raises(ValueError, match="exceeds the model's context of 4096 tokens; shorten them or pass "
                                         "allow_long_context=True"):
        engine.generate([3] * 4090, gen_length=16, steps=16)
    result = engine.generate([3] * 4090, gen_length=16, steps=1, allow_long_context=True)
    assert len(result.output_ids) == 16
