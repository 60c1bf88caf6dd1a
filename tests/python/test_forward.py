"""engine.forward: logits of the requested rows as NumPy arrays, equal to `mosaic forward`'s."""

import numpy as np
import pytest

import mosaic


def test_agrees_with_cli_logits(models, engines, cli, tmp_path):
    out = tmp_path / "logits.npy"
    cli("forward", "--model", models["llada"], "--device", "cpu", "--ids", "5,1000,7,1000", "--rows", "1,3",
        "--ids", "9,10,1000", "--rows", "0,2", "--logits-out", out)
    expected = np.load(out)
    logits = engines["llada"].forward([[5, 1000, 7, 1000], [9, 10, 1000]], rows=[[1, 3], [0, 2]])
    assert logits.dtype == np.float32 and logits.shape == (4, 1024)
    np.testing.assert_array_equal(logits, expected)


def test_dream_agrees_with_cli_default_rows(models, engines, cli, tmp_path):
    out = tmp_path / "dream.npy"
    cli("forward", "--model", models["dream"], "--device", "cpu", "--ids", "5,6,1000,1000", "--logits-out", out)
    np.testing.assert_array_equal(engines["dream"].forward([5, 6, 1000, 1000]), np.load(out))


def test_single_sequence_forms(engines):
    engine = engines["llada"]
    logits = engine.forward([5, 1000, 7, 1000])  # rows default to the masked positions
    assert logits.shape == (2, 1024)
    np.testing.assert_array_equal(engine.forward(np.array([5, 1000, 7, 1000]), rows=[1, 3]), logits)
    np.testing.assert_array_equal(engine.forward([5, 1000, 7, 1000], rows=np.array([3]))[0], logits[1])
    batch = engine.forward(np.array([[5, 1000, 7, 1000], [5, 1000, 7, 1000]]))
    np.testing.assert_array_equal(batch, np.concatenate([logits, logits]))
    logits, memory = engine.forward([5, 1000], return_memory=True)
    assert memory["planned_peak_bytes"] > 0 and memory["lower_bound_bytes"] <= memory["planned_peak_bytes"]
    assert logits.flags.owndata is False and logits.base is not None  # the engine's buffer, not a copy


@pytest.mark.parametrize("ids, rows, error, fragment", [
    ([5, 6, 7], None, ValueError, "sequence 0 has no masked position (mask id 1000) and no rows were given"),
    ([5, 6, 7], [3], mosaic.Error, "sequence 0: requested row 3 is outside the sequence of length 3"),
    ([5, 6, 9999], [0], mosaic.Error, "token id 9999 at position 2 is outside the vocabulary [0, 1024)"),
    ([[5, 6], [7, 8]], [[0]], ValueError, "rows: 1 lists for 2 sequences"),
    ([5.5, 6], [0], TypeError, "ids: expected ints, got float"),
    ([5, 6], ["0"], TypeError, "rows: expected ints, got str"),
    ([], None, ValueError, "the batch is empty"),
    (np.zeros((2, 2, 2), dtype=np.int32), None, ValueError, "got shape (2, 2, 2)"),
])
def test_bad_forward_inputs(engines, ids, rows, error, fragment):
    with pytest.raises(error) as raised:
        engines["llada"].forward(ids, rows)
    assert fragment in str(raised.value)
