"""mosaic.plan / find_lmax / Engine.plan: the dicts `mosaic plan --json` prints."""

import pytest

import mosaic

TIMINGS = ("planning_ms", "chunk_search_ms", "search_ms")


def without_timings(document):
    if isinstance(document, dict):
        return {k: without_timings(v) for k, v in document.items() if k not in TIMINGS}
    return document


@pytest.mark.parametrize("cli_args, keywords", [
    (["--seq-len", 8192], dict(seq_len=8192)),
    (["--seq-len", 4096, "--masked", 100, "--device", "cpu"], dict(seq_len=4096, masked=100, device="cpu")),
    (["--batch", "4096,1024,512", "--prompt-len", 256, "--head", "logits"],
     dict(batch=[4096, 1024, 512], prompt_len=256, head="logits")),
    (["--seq-len", 32768, "--chunks", "1,2,4,8", "--dtype", "fp32", "--planner", "greedy-by-size"],
     dict(seq_len=32768, chunks={"attention": 2, "ffn": 4, "head": 8}, dtype="fp32", planner="greedy-by-size")),
    (["--seq-len", 131072, "--budget", "24GiB"], dict(seq_len=131072, budget="24GiB")),
    (["--seq-len", 32768, "--budget", "8GiB", "--weights", "auto"], dict(seq_len=32768, budget="8GiB", weights="auto")),
    (["--seq-len", 65536, "--chunks", "2,4,4,1", "--weights", "host", "--residual", "host"],
     dict(seq_len=65536, chunks=(2, 4, 4, 1), weights="host", residual="host")),
])
def test_preset_plans_agree_with_the_cli(cli, cli_args, keywords):
    expected = cli.json("plan", "--model", "llada-8b", *cli_args)
    assert without_timings(mosaic.plan("llada-8b", **keywords)) == without_timings(expected)


def test_what_lives_in_host_memory_is_reported():
    streamed = mosaic.plan("llada-8b", seq_len=32768, budget="8GiB", weights="auto")
    assert streamed["streamed_weights"]["layers"] == 22  # the fewest that leave room at 32k
    assert streamed["total_bytes"] <= 8 * 2**30
    both = mosaic.plan("llada-8b", seq_len=4096, chunks=(1, 2, 2, 1), weights="host", residual="host")
    assert both["residual"]["host_bytes"] == 4096 * 4096 * 2
    assert both["streamed_weights"]["layers"] == 32


def test_engine_plan_is_the_plan_of_its_folder_and_device(models, engines, cli):
    expected = cli.json("plan", "--model", models["dream"], "--seq-len", 2048, "--device", "cpu")
    plan = engines["dream"].plan(seq_len=2048)
    assert without_timings(plan) == without_timings(expected)
    assert plan["family"] == "dream" and plan["tokens"] == 2048 and plan["candidates"] == 1024
    assert plan["workspace_bytes"] == 0  # the CPU plans no workspace
    budgeted = mosaic.Engine(models["dream"], device="cpu", budget="64MiB")
    assert budgeted.plan(seq_len=2048)["budget_bytes"] == 64 * 2**20


def test_find_lmax_agrees_with_the_cli(models, engines, cli):
    expected = cli.json("plan", "--model", models["llada"], "--find-lmax", "--budget", "128MiB")
    lmax = mosaic.find_lmax(models["llada"], "128MiB")
    assert without_timings(lmax) == without_timings(expected)
    assert lmax["l_max"] > 0 and lmax["l_max"] % 1024 == 0
    assert lmax["at_l_max"]["total_bytes"] <= 128 * 2**20
    assert engines["llada"].find_lmax("128MiB", device="cuda")["l_max"] == lmax["l_max"]
    with pytest.raises(ValueError, match="needs a budget"):
        engines["llada"].find_lmax()


def test_timeline_for_plotting():
    plan = mosaic.plan("dream-7b", seq_len=1024, timeline=True)
    assert len(plan["timeline"]) == plan["ops"] == len(plan["op_names"])
    assert all(len(row) == len(plan["categories"]) for row in plan["timeline"])
    assert max(sum(row) for row in plan["timeline"]) == plan["lower_bound_bytes"]
    assert "timeline" not in mosaic.plan("dream-7b", seq_len=1024)


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(), TypeError, "plan() needs seq_len"),
    (dict(seq_len=1024, batch=[512]), ValueError, "either seq_len or batch"),
    (dict(seq_len=1024, budget="24GiB", chunks=(1, 1, 2, 1)), ValueError, "give budget or chunks, not both"),
    (dict(seq_len=0), ValueError, "seq_len must be positive"),
    (dict(seq_len="1024"), TypeError, "seq_len must be an int"),
    (dict(seq_len=1024, masked=2048), ValueError, "masked = 2048 must be between 0 and the sequence length 1024"),
    (dict(seq_len=1024, chunks=(1, 2)), ValueError, "four counts"),
    (dict(seq_len=1024, chunks={"mlp": 2}), ValueError, "unknown group 'mlp'"),
    (dict(seq_len=1024, device="tpu"), mosaic.Error, "device 'tpu' is not supported"),
    (dict(seq_len=1024, planner="best-fit"), mosaic.Error, "planner 'best-fit' is not supported"),
    (dict(seq_len=2**20, budget="17GiB"), mosaic.Error, "the step needs at least"),
    (dict(seq_len=1024, weights="sideways"), mosaic.Error, "weights 'sideways' is not a placement"),
    (dict(seq_len=1024, residual="disk"), mosaic.Error, "residual 'disk' is not a placement"),
    (dict(seq_len=1024, weights=1), TypeError, "weights must be a string"),
])
def test_bad_plan_arguments(keywords, error, fragment):
    with pytest.raises(error) as raised:
        mosaic.plan("llada-8b", **keywords)
    assert fragment in str(raised.value)


def test_unknown_model_is_file_not_found():
    with pytest.raises(FileNotFoundError, match="not a preset"):
        mosaic.plan("llada-9b", seq_len=1024)


def test_plan_of_one_tensor_parallel_rank():
    one = mosaic.plan("llada-8b", seq_len=4096)
    rank = mosaic.plan("llada-8b", seq_len=4096, tensor_parallel=8)
    assert "tensor_parallel" not in one
    assert rank["tensor_parallel"]["ranks"] == 8
    assert rank["tensor_parallel"]["all_reduces"] == 65
    assert rank["weight_bytes"] < one["weight_bytes"] / 7
    assert rank["activation_peak_bytes"] < one["activation_peak_bytes"]
    with pytest.raises(mosaic.Error, match="28 attention heads do not divide into 8"):
        mosaic.plan("dream-7b", seq_len=4096, tensor_parallel=8)
    with pytest.raises(ValueError, match="tensor_parallel must be positive"):
        mosaic.plan("llada-8b", seq_len=4096, tensor_parallel=0)
    # A rank's budget: LLaDA-8B's weights do not fit 8 GiB on one GPU, an eighth of them do.
    assert mosaic.find_lmax("llada-8b", "8GiB", tensor_parallel=8)["l_max"] > 0


def test_plan_of_the_busiest_context_parallel_rank():
    rank = mosaic.plan("llada-8b", seq_len=32768, context_parallel=8)["context_parallel"]
    assert (rank["ranks"], rank["rank"], rank["rank_tokens"], rank["step_tokens"]) == (8, 4, 4096, 32768)
    assert rank["all_gathers"] == 64


def test_context_parallel_ranks_generate_what_one_rank_does(models):
    one = mosaic.Engine(models["llada"], device="cpu")
    three = mosaic.Engine(models["llada"], device="cpu", context_parallel=3)
    request = dict(gen_length=8, block_length=8, steps=8)
    assert three.generate([3, 17, 999, 4], **request).output_ids == one.generate([3, 17, 999, 4], **request).output_ids
    assert three.plan(64)["context_parallel"]["ranks"] == 3
