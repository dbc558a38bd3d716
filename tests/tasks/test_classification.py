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
    items, labels = np.asarray(x[..., :63], np.float64), np.asarray(x[..., 63:])
    # Every item is a bank row, ids uniform over the bank. Squared distances as |a|^2 + |b|^2 - 2 a.b in
    # float64 (rounding ~1e-16 here), not a (B, N, P, 63) difference array of 4 GB.
    bank64 = bank.astype(np.float64)
    d2 = (items**2).sum(-1)[..., None] + (bank64**2).sum(-1) - 2 * items @ bank64.T
    ids = np.argmin(d2, axis=-1)
    assert np.all(np.abs(d2.min(axis=-1)) < 1e-12)  # distance < 1e-6, as an exact copy gives
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


# ---- the data-distribution levers (classification-task.md §2.7) -------------------------------------


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5])
def test_zipf_frequencies_follow_the_law_below_a_traced_K(alpha):
    K, size, n = 40, 100, 400_000
    cdf = task.zipf_cdf(alpha, K, size)
    ids = np.asarray(jax.jit(task.iid_ids, static_argnums=2)(KEY, jnp.int32(K), (n,), cdf))
    assert ids.min() >= 0 and ids.max() < K
    p = (np.arange(K) + 1.0) ** -alpha
    p /= p.sum()
    freq = np.bincount(ids, minlength=K) / n
    # Each frequency within 5 binomial sd of P(k).
    np.testing.assert_array_less(np.abs(freq - p), 5 * np.sqrt(p * (1 - p) / n))


def test_frequent_band_is_the_ids_drawn_at_least_as_often_as_uniform():
    # alpha = 1, K = 1000: P(k) = 1 / ((k + 1) H_1000) >= 1/K  <=>  k + 1 <= 1000 / 7.4855 = 133.6.
    assert task.frequent_count(1.0, 1000) == 133
    assert task.frequent_count(2.0, 10) == 2  # P = 0.645, 0.161, 0.072 ...: two above 0.1


def test_zipf_standard_sampler_keeps_the_target_in_context():
    ids = np.asarray(task.target_present_ids(KEY, jnp.int32(50), 2000, 12, task.zipf_cdf(1.0, 50, 64)))
    assert ids.max() < 50 and np.all((ids[:, :-1] == ids[:, -1:]).any(axis=1))


def test_bursty_contexts_repeat_each_item_B_times_and_hold_the_target():
    B, N, n = 4, 13, 3000
    ids = np.asarray(task.bursty_ids(KEY, jnp.int32(10**6), n, N, B, jnp.float32(1.0)))
    for row in ids:  # K = 1e6: the 3 drawn items are distinct (almost surely), each exactly B times
        counts = np.unique(row[:-1], return_counts=True)[1]
        assert sorted(counts.tolist()) == [B] * ((N - 1) // B)
    assert np.all((ids[:, :-1] == ids[:, -1:]).sum(axis=1) == B)
    # The target is each of the 3 context items equally often (1/3, sd 0.009 over 3000).
    first = np.argmax(ids[:, :-1] == ids[:, -1:], axis=1)
    order = np.array([len(np.unique(r[: f + 1])) - 1 for r, f in zip(ids, first)])  # 0, 1, 2: order of appearance
    np.testing.assert_allclose(np.bincount(order, minlength=3) / n, 1 / 3, atol=0.04)


def test_bursty_mixture_fraction_and_iid_targets_drawn_independently():
    B, N, n, K = 2, 9, 8000, 20
    ids = np.asarray(task.bursty_ids(KEY, jnp.int32(K), n, N, B, jnp.float32(0.3)))
    counts = np.stack([np.bincount(r[:-1], minlength=K) for r in ids])
    bursty = np.all(counts % B == 0, axis=1)
    # An i.i.d. context of 8 ids below 20 has all-even counts with probability ~1e-3: the bursty fraction
    # is 0.3 (sd 0.005), and the others' target is present with probability 1 - (19/20)^8 = 0.337.
    assert abs(bursty.mean() - 0.3) < 0.02
    present = (ids[~bursty, :-1] == ids[~bursty, -1:]).any(axis=1)
    assert abs(present.mean() - (1 - (19 / 20) ** 8)) < 0.025


@pytest.mark.parametrize("bank", [0, 4096])
def test_item_noise_has_the_defined_mean_and_variance_and_spares_the_labels(bank):
    D, eps = 63, 0.75
    x = jnp.broadcast_to(jnp.concatenate([jnp.full(D, 0.5 / np.sqrt(D)), jnp.array([0.0, 1.0])]), (4000, 5, D + 2))
    bank_PxD = task.make_pool(jax.random.key(7), bank, D) if bank else None
    noisy = np.asarray(task.item_noise(KEY, x, jnp.float32(eps), D, bank_PxD))
    np.testing.assert_array_equal(noisy[..., D:], np.asarray(x[..., D:]))
    items, mu = noisy[..., :D], np.asarray(x[0, 0, :D])
    scale = np.sqrt(1 + eps**2)
    # 20,000 occurrences, and with a bank its P rows' own sample mean and variance, set the tolerances (5 sd).
    n, inv_P = 20000, 1 / bank if bank else 0.0
    np.testing.assert_allclose(items.mean(axis=(0, 1)), mu / scale, atol=5 * eps / scale * np.sqrt((1 / n + inv_P) / D))
    # Per-coordinate variance eps^2 / (D (1 + eps^2)), independent per token (uncorrelated across tokens).
    np.testing.assert_allclose(
        items.var(axis=(0, 1)).mean(), eps**2 / (D * scale**2), rtol=5 * np.sqrt(2 * (1 / n + inv_P) / D)
    )
    corr = np.corrcoef(items[:, 0, 0], items[:, 1, 0])[0, 1]
    assert abs(corr) < 0.05
    if bank:  # every eta is a bank row, the rows chosen uniformly (chi-square over the 20,000 occurrences)
        eta_nxD, bank_PxD = ((items * scale - mu) / eps).reshape(-1, D), np.asarray(bank_PxD)
        rows = np.argmin((bank_PxD**2).sum(1)[None] - 2 * eta_nxD @ bank_PxD.T, axis=1)
        np.testing.assert_allclose(eta_nxD, bank_PxD[rows], atol=1e-5)
        assert stats.chisquare(np.bincount(rows, minlength=bank)).pvalue > 1e-3
