"""Statistics of the on-device samplers, against what the construction guarantees."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from icl_race.tasks import classification as task

KEY = jax.random.key(7)


def test_pool_item_depends_only_on_its_id():
    small, large = task.make_pool(KEY, 50, 63), task.make_pool(KEY, 200, 63)
    np.testing.assert_array_equal(small, large[:50])
    # N(0, I/D): squared norms average 1.
    assert abs(float(jnp.mean(jnp.sum(large**2, axis=1))) - 1.0) < 0.05


@pytest.mark.parametrize("K", [2, 10, 1000])
def test_label_map_balanced_for_traced_K(K):
    labels, order = jax.jit(task.balanced_label_map, static_argnums=2)(KEY, jnp.int32(K), 2048)
    labels, order = np.asarray(labels), np.asarray(order)
    assert labels[:K].sum() == K // 2 and labels[K:].sum() == 0
    assert set(order[: K // 2]) == set(np.flatnonzero(labels[:K] == 0))
    assert set(order[K // 2 : K]) == set(np.flatnonzero(labels[:K] == 1))
    # The map of ids < K does not depend on the padded size.
    small, _ = task.balanced_label_map(KEY, jnp.int32(K), K)
    np.testing.assert_array_equal(labels[:K], small)


def test_label_maps_differ_between_keys_and_are_uniform():
    maps = np.stack([task.balanced_label_map(jax.random.key(s), jnp.int32(10), 10)[0] for s in range(400)])
    # Each id is label 1 in half the maps (sd 0.025 over 400 maps).
    np.testing.assert_allclose(maps.mean(axis=0), 0.5, atol=0.1)


@pytest.mark.parametrize("K", [5, 100, 100_000])
def test_standard_target_always_in_context(K):
    ids = np.asarray(task.target_present_ids(KEY, jnp.int32(K), 4000, 100))
    assert ids.min() >= 0 and ids.max() < K
    assert np.all((ids[:, :-1] == ids[:, -1:]).any(axis=1))


def test_standard_context_label_counts_are_binomial():
    K, N, B = 10_000, 100, 4000
    labels, _ = task.balanced_label_map(KEY, jnp.int32(K), K)
    pool = task.make_pool(jax.random.key(1), K, 63)
    ids = task.target_present_ids(KEY, jnp.int32(K), B, N)
    x, y = task.pooled_sequences(task.token_table(pool), labels, ids)
    # The one-gather form equals the definition: items and labels gathered apart, then tokens().
    x_def, y_def = task.tokens(pool[ids], labels[ids])
    assert np.array_equal(np.asarray(x), np.asarray(x_def)) and np.array_equal(np.asarray(y), np.asarray(y_def))
    ones = np.asarray(x[:, :-1, -1].sum(axis=1))
    # Binomial(99, 1/2): mean 49.5, sd 4.97; the mean of 4000 has sd 0.08.
    assert abs(ones.mean() - 49.5) < 0.4 and abs(ones.std() - 4.97) < 0.3
    assert np.all(np.asarray(x[:, -1, -2:]) == 0), "the query's label slot must be zero"
    assert set(np.unique(np.asarray(y))) == {-1.0, 1.0}


def test_infinite_items_distinct_and_query_copies_a_context_item():
    x, y = task.fresh_sequences(KEY, 500, 20, 63, query_in_context=True)
    items, labels = np.asarray(x[..., :63]), np.asarray(x[..., 63:])
    ctx = items[:, :-1]
    d = np.linalg.norm(ctx[:, :, None] - ctx[:, None, :], axis=-1) + np.eye(19)[None]
    assert d.min() > 1e-3, "context items must be distinct"
    match = np.all(np.isclose(ctx, items[:, -1:]), axis=-1)
    assert np.all(match.sum(axis=1) == 1)
    # The target is the label of the copied item.
    copied = np.argmax(match, axis=1)
    np.testing.assert_array_equal(2 * labels[np.arange(500), copied, 1] - 1, np.asarray(y))
    # Labels are i.i.d. uniform per position, not balanced per sequence.
    assert abs(labels[:, :-1, 1].mean() - 0.5) < 0.02


def test_infinite_iwl_query_absent_from_context():
    x, _ = task.fresh_sequences(KEY, 200, 20, 63, query_in_context=False)
    items = np.asarray(x[..., :63])
    assert np.linalg.norm(items[:, :-1] - items[:, -1:], axis=-1).min() > 1e-3


def test_bank_sequences_are_fresh_sequences_over_a_fixed_bank():
    P, B, N = 256, 4000, 16
    bank = np.asarray(task.make_pool(KEY, P, 63))
    x, y = task.bank_sequences(jax.random.key(3), task.token_table(jnp.asarray(bank)), B, N, query_in_context=True)
    items, labels = np.asarray(x[..., :63]), np.asarray(x[..., 63:])
    # Every item is a bank row, ids uniform over the bank.
    dist = np.linalg.norm(items[:, :, None] - bank[None, None], axis=-1)
    ids = np.argmin(dist, axis=-1)
    assert np.allclose(dist.min(axis=-1), 0, atol=1e-6)
    assert stats.chisquare(np.bincount(ids[:, :-1].ravel(), minlength=P)).pvalue > 1e-3
    # The query copies a context item and carries its label (when that vector is not repeated).
    match = ids[:, :-1] == ids[:, -1:]
    assert np.all(match.any(axis=1))
    copied = np.argmax(match, axis=1)
    one = match.sum(axis=1) == 1
    np.testing.assert_array_equal((2 * labels[np.arange(B), copied, 1] - 1)[one], np.asarray(y)[one])
    assert np.all(labels[:, -1] == 0)
    # Labels i.i.d. uniform per position and sequence: nothing ties a bank row to a label.
    assert abs(labels[:, :-1, 1].mean() - 0.5) < 0.01
    same_id = [labels[:, :-1][ids[:, :-1] == k][:, 1].mean() for k in range(4)]
    assert max(abs(m - 0.5) for m in same_id) < 0.1
    # A repeated vector in a context: exactly the birthday probability of N - 1 draws from P.
    no_repeat = np.array([len(set(row)) == N - 1 for row in ids[:, :-1]])
    expected = np.prod(1 - np.arange(N - 1) / P)
    assert abs(no_repeat.mean() - expected) < 4 * np.sqrt(expected * (1 - expected) / B)
    # The IWL variant draws the query independently: it is in the context with probability ~ (N-1)/P.
    x, _ = task.bank_sequences(jax.random.key(4), task.token_table(jnp.asarray(bank)), B, N, query_in_context=False)
    q_in = np.all(np.isclose(np.asarray(x[:, :-1, :63]), np.asarray(x[:, -1:, :63])), axis=-1).any(axis=1)
    assert abs(q_in.mean() - (1 - (1 - 1 / P) ** (N - 1))) < 0.015


@pytest.mark.parametrize("K", [100, 3000])
def test_distinct_ids_are_distinct_uniform_and_target_absent(K):
    N, B = 100, 3000
    ids = np.asarray(jax.jit(task.distinct_ids, static_argnums=(2, 3))(KEY, jnp.int32(K), B, N))
    assert ids.min() >= 0 and ids.max() < K
    assert all(len(set(row)) == N for row in ids[:200])
    assert not np.any(ids[:, :-1] == ids[:, -1:]), "IWL target must be absent from its context"
    # Every id is equally likely at every position (expected count B*N/K per id).
    counts = np.bincount(ids.ravel(), minlength=K)
    expected = B * N / K
    assert np.abs(counts - expected).max() < 6 * np.sqrt(expected)
    # The target position is not biased towards the ids Floyd's algorithm adds last.
    assert abs(ids[:, -1].mean() - (K - 1) / 2) < 4 * K / np.sqrt(12 * B)


def test_balanced_context_label_counts_are_pinned():
    K, N, B = 40, 10, 4000  # small K so that repeated draws are common: both branches run
    labels, order = task.balanced_label_map(KEY, jnp.int32(K), K)
    ids = np.asarray(task.balanced_ids(jax.random.key(3), order, jnp.int32(K), B, N))
    lab = np.asarray(labels)[ids]
    q = lab[:, -1:]
    # The construction always leaves N/2 - 1 context items of the query's class and N/2 of the other.
    assert np.all((lab[:, :-1] == q).sum(axis=1) == N // 2 - 1)
    assert np.all((lab[:, :-1] != q).sum(axis=1) == N // 2)
    assert np.all((ids[:, :-1] == ids[:, -1:]).any(axis=1)), "query must occur in its context"
    assert abs(q.mean() - 0.5) < 0.03
    # The context order is shuffled: the query's class is not concentrated at either end.
    same = lab[:, :-1] == q
    assert abs(same[:, 0].mean() - same[:, -1].mean()) < 0.05


def test_icl_test_items_are_novel():
    from icl_race import config
    from icl_race.systems import build

    cfg = config.from_dict({"task": {"K": 300, "N": 8, "icl_pool": 100}, "model": {"width": 8}})
    program, consts = build(cfg)
    state = program.init(KEY, consts)
    x, _ = program.icl_batch(state, consts, KEY, 500)
    items = np.asarray(x[..., :63]).reshape(-1, 63)
    train_pool, novel_pool = np.asarray(consts["pool"])[:, :63], np.asarray(consts["novel"])[:, :63]
    assert novel_pool.shape == (100, 63)
    d_train = np.linalg.norm(items[:, None] - train_pool[None], axis=-1).min(axis=1)
    d_novel = np.linalg.norm(items[:, None] - novel_pool[None], axis=-1).min(axis=1)
    assert d_train.min() > 1e-3 and d_novel.max() < 1e-6
