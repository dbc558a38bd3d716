"""In-context classification of arXiv 2412.00104, sampled on the device from keys.

A sequence has N tokens [item (D) | onehot(label) (2)]; the last token is the query, its label slot
zero, and its target is y = 2 * label - 1. K (the number of training items) is a traced scalar: the
item pool has a static size K_max and ids are drawn below K, so one compilation serves every K <= K_max.
Item k of a pool is drawn from fold_in(pool_key, k), so it is the same whatever K_max is.

The data-distribution levers (docs/config.md: Zipf frequencies, bursty contexts, item
noise) keep the token format; with their defaults every sampler draws exactly what it drew without them.

Shape suffixes: B sequences, N tokens, D item dims, E = D + 2 token dims, P pool size, C classes per
bursty context, M = N - 1 context tokens.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


def make_pool(key: jax.Array, size: int, dim: int) -> jax.Array:
    """Items mu_k ~ N(0, I/D), k < size; item k depends only on (key, k)."""
    draw = lambda k: jax.random.normal(jax.random.fold_in(key, k), (dim,)) / jnp.sqrt(dim)
    return jax.vmap(draw)(jnp.arange(size))


def fixed_pool(seed: int, size: int, dim: int, tokens: bool) -> jax.Array:
    """make_pool(key(seed), size, dim), as token rows (`token_table`) with `tokens`, drawn once per process
    and kept: a sweep's cells share their fixed pools (task.K_max, the same seeds), and a paper grid's pool
    (4e5 items) takes ~0.5 s to draw for each of its cells (`sweep --dry-run` of experiments/fig6a.toml
    builds 150). The cells get the same array object, so run/identity.py digests it once. Under a trace (the
    memory check's abstract build) it is drawn traced, never kept: a tracer must not outlive its trace."""
    if isinstance(jnp.zeros(()), jax.core.Tracer):
        return _draw_pool(seed, size, dim, tokens)
    return _kept_pool(seed, size, dim, tokens)


def _draw_pool(seed: int, size: int, dim: int, tokens: bool) -> jax.Array:
    items_PxD = make_pool(jax.random.key(seed), size, dim)
    return token_table(items_PxD) if tokens else items_PxD


# Kept on the default device: jax arrays are immutable and the engine never donates its constants.
_kept_pool = functools.lru_cache(maxsize=4)(_draw_pool)


def balanced_label_map(key: jax.Array, K: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """A uniformly random balanced map of ids 0..K-1 to {0, 1}, K traced and even.

    Returns (labels_P int8, order_P int32): order[:K//2] lists the class-0 ids, order[K//2:K] the
    class-1 ids, which is what the balanced sampler draws from. Ids >= K get label 0 and sit at the end.
    """
    ids = jnp.arange(size)
    u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(key, k)))(ids)
    order = jnp.argsort(jnp.where(ids < K, u, 2.0)).astype(jnp.int32)
    rank = jnp.zeros(size, jnp.int32).at[order].set(ids.astype(jnp.int32))
    labels = ((rank >= K // 2) & (ids < K)).astype(jnp.int8)
    return labels, order


def tokens(items_BxNxD: jax.Array, labels_BxN: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Token matrix with the query's label slot zeroed, and the target y_B in {-1, +1}."""
    onehot_BxNx2 = jax.nn.one_hot(labels_BxN, 2, dtype=items_BxNxD.dtype)
    onehot_BxNx2 = onehot_BxNx2.at[:, -1].set(0.0)
    x_BxNxE = jnp.concatenate([items_BxNxD, onehot_BxNx2], axis=-1)
    y_B = 2.0 * labels_BxN[:, -1].astype(items_BxNxD.dtype) - 1.0
    return x_BxNxE, y_B


def zipf_cdf(alpha: float, K: int, size: int) -> jax.Array:
    """cdf_P of the Zipf law P(k) ~ (k + 1)^-alpha on ids k < K, padded to the static size with 1.
    Summed in float64 on the host; stored in float32, whose resolution (~6e-8 near 1) is that of the
    uniform draws it is searched with, so items rarer than that are drawn at a coarsened rate."""
    w = np.where(np.arange(size) < K, (np.arange(size) + 1.0) ** -alpha, 0.0)
    cdf = np.cumsum(w) / np.sum(w)
    cdf[K - 1 :] = 1.0  # exactly: a uniform draw in [0, 1) then always lands below K
    return jnp.asarray(cdf, jnp.float32)


def frequent_count(alpha: float, K: int) -> int:
    """How many ids the Zipf law draws at least as often as the uniform law does (P(k) >= 1/K): the
    IWL test's "frequent" band is ids below this count, the "rare" band the rest."""
    w = (np.arange(K) + 1.0) ** -alpha
    return int(np.sum(w / np.sum(w) >= 1.0 / K))


def iid_ids(key: jax.Array, K: jax.Array, shape: tuple, cdf_P: jax.Array | None = None) -> jax.Array:
    """Ids below K drawn i.i.d.: uniformly, or by inverting cdf_P (`zipf_cdf`, K traced inside it)."""
    if cdf_P is None:
        return jax.random.randint(key, shape, 0, K)
    return jnp.searchsorted(cdf_P, jax.random.uniform(key, shape), side="right").astype(jnp.int32)


def target_present_ids(key: jax.Array, K: jax.Array, B: int, N: int, cdf_P: jax.Array | None = None) -> jax.Array:
    """Ids i.i.d. below K (uniform, or by cdf_P); if the query's id is absent from the context it is
    replaced by the id at a uniform context position, so the target is always in context (the
    reference's rule)."""
    k_ids, k_pos = jax.random.split(key)
    ids_BxN = iid_ids(k_ids, K, (B, N), cdf_P)
    present_B = jnp.any(ids_BxN[:, :-1] == ids_BxN[:, -1:], axis=1)
    pos_B = jax.random.randint(k_pos, (B,), 0, N - 1)
    fallback_B = jnp.take_along_axis(ids_BxN, pos_B[:, None], axis=1)[:, 0]
    return ids_BxN.at[:, -1].set(jnp.where(present_B, ids_BxN[:, -1], fallback_B))


def bursty_ids(
    key: jax.Array, K: jax.Array, B: int, N: int, burst: int, p_bursty: jax.Array, cdf_P: jax.Array | None = None
) -> jax.Array:
    """Reddy (2023)'s training sequences (docs/config.md, task.burstiness): with probability p_bursty a
    bursty context of (N - 1) / burst ids drawn i.i.d. (uniform, or by cdf_P), each repeated `burst`
    times in shuffled order, and a target that is one of them chosen uniformly (so it occurs `burst`
    times, or a multiple); otherwise N - 1 i.i.d. context ids and an independently drawn target,
    which may be absent from its context (only in-weights memory helps then)."""
    k_cls, k_perm, k_pick, k_iid, k_mix = jax.random.split(key, 5)
    C = (N - 1) // burst
    cls_BxC = iid_ids(k_cls, K, (B, C), cdf_P)
    ctx_BxM = jax.vmap(jax.random.permutation)(jax.random.split(k_perm, B), jnp.repeat(cls_BxC, burst, axis=1))
    target_B = jnp.take_along_axis(cls_BxC, jax.random.randint(k_pick, (B, 1), 0, C), axis=1)
    bursty_BxN = jnp.concatenate([ctx_BxM, target_B], axis=1)
    iid_BxN = iid_ids(k_iid, K, (B, N), cdf_P)
    return jnp.where(jax.random.bernoulli(k_mix, p_bursty, (B, 1)), bursty_BxN, iid_BxN)


def noisy_items(
    key: jax.Array, items_xD: jax.Array, epsilon: jax.Array, scale: float = 1.0, bank_PxD: jax.Array | None = None
) -> jax.Array:
    """Every item mu (pool items times `scale`) replaced by (mu + epsilon * scale * eta) / sqrt(1 + epsilon^2),
    eta ~ N(0, I/D) independent per occurrence, so items keep their norm: drawn fresh, or as a uniformly
    chosen row of bank_PxD (make_pool's N(0, I/D) rows), which costs one id per occurrence instead of D
    Gaussians; two occurrences in a batch of n then share an eta with probability ~ n^2 / 2P."""
    D = items_xD.shape[-1]
    if bank_PxD is None:
        eta_xD = jax.random.normal(key, items_xD.shape, items_xD.dtype) / jnp.sqrt(D)
    else:
        eta_xD = bank_PxD[jax.random.randint(key, items_xD.shape[:-1], 0, bank_PxD.shape[0])]
    return (items_xD + (epsilon * scale) * eta_xD) / jnp.sqrt(1.0 + epsilon * epsilon)


def item_noise(
    key: jax.Array, x_BxNxE: jax.Array, epsilon: jax.Array, D: int, bank_PxD: jax.Array | None = None
) -> jax.Array:
    """Every token's item made noisy (`noisy_items`), query included; the label slots are untouched."""
    return jnp.concatenate([noisy_items(key, x_BxNxE[..., :D], epsilon, bank_PxD=bank_PxD), x_BxNxE[..., D:]], axis=-1)


def balanced_ids(key: jax.Array, order_P: jax.Array, K: jax.Array, B: int, N: int) -> jax.Array:
    """The reference's balanced construction: N/2 draws from each class, one draw moved to the query
    (a repeated draw if the uniformly chosen one repeats, else a copy made within a random class),
    then the context shuffled. Consequence: the context always holds N/2 - 1 items of the query's
    class and N/2 of the other."""
    half = N // 2
    ks = jax.random.split(key, 6)
    # Ranks < K//2 are class 0, the next K//2 class 1 (balanced_label_map's order).
    rank_Bxh0 = jax.random.randint(ks[0], (B, half), 0, K // 2)
    rank_Bxh1 = K // 2 + jax.random.randint(ks[1], (B, half), 0, K // 2)
    ids_BxN = order_P[jnp.concatenate([rank_Bxh0, rank_Bxh1], axis=1)]
    s_B = jax.random.randint(ks[2], (B,), 0, N)
    at_s_B = jnp.take_along_axis(ids_BxN, s_B[:, None], axis=1)[:, 0]
    repeated_B = jnp.sum(ids_BxN == at_s_B[:, None], axis=1) >= 2
    # No repeat: overwrite the last draw of a random class with a copy of another draw of that class.
    c_B = jax.random.randint(ks[3], (B,), 0, 2)
    last_B = c_B * half + half - 1
    src_B = c_B * half + jax.random.randint(ks[4], (B,), 0, half - 1)
    copy_B = jnp.take_along_axis(ids_BxN, src_B[:, None], axis=1)[:, 0]
    qpos_B = jnp.where(repeated_B, s_B, last_B)
    query_B = jnp.where(repeated_B, at_s_B, copy_B)
    # Drop the query position from the context, then shuffle the context.
    keep_BxM = jnp.arange(N - 1)[None, :] + (jnp.arange(N - 1)[None, :] >= qpos_B[:, None])
    ctx_BxM = jnp.take_along_axis(ids_BxN, keep_BxM, axis=1)
    ctx_BxM = jax.vmap(jax.random.permutation)(jax.random.split(ks[5], B), ctx_BxM)
    return jnp.concatenate([ctx_BxM, query_B[:, None]], axis=1)


def distinct_ids(key: jax.Array, K: jax.Array, B: int, N: int) -> jax.Array:
    """N distinct ids below K per sequence, in uniformly random order (Floyd's algorithm, O(N^2),
    then a permutation: cheap for any K, unlike sorting K random keys per sequence)."""
    k_floyd, k_perm = jax.random.split(key)
    pos_N = jnp.arange(N)

    def pick(ids_BxN, i_key):
        i, k = i_key
        j = K - N + i  # draw from [0, j]; on a clash take j itself, which nothing before can hold
        t_B = jax.random.randint(k, (B,), 0, j + 1)
        clash_B = jnp.any((ids_BxN == t_B[:, None]) & (pos_N[None, :] < i), axis=1)
        return ids_BxN.at[:, i].set(jnp.where(clash_B, j, t_B)), None

    ids_BxN, _ = jax.lax.scan(pick, jnp.zeros((B, N), jnp.int32), (pos_N, jax.random.split(k_floyd, N)))
    return jax.vmap(jax.random.permutation)(jax.random.split(k_perm, B), ids_BxN)


def fresh_sequences(key: jax.Array, B: int, N: int, D: int, query_in_context: bool):
    """K = infinity: N - 1 fresh context items with i.i.d. uniform labels; the query copies a uniform
    context item (ICL is possible) or is itself fresh with a random label (only chance is possible)."""
    k_items, k_labels, k_pos = jax.random.split(key, 3)
    items_BxNxD = jax.random.normal(k_items, (B, N, D)) / jnp.sqrt(D)
    labels_BxN = jax.random.randint(k_labels, (B, N), 0, 2)
    if query_in_context:
        pos_B = jax.random.randint(k_pos, (B,), 0, N - 1)
        q_items_BxD = jnp.take_along_axis(items_BxNxD, pos_B[:, None, None], axis=1)[:, 0]
        q_labels_B = jnp.take_along_axis(labels_BxN, pos_B[:, None], axis=1)[:, 0]
        items_BxNxD = items_BxNxD.at[:, -1].set(q_items_BxD)
        labels_BxN = labels_BxN.at[:, -1].set(q_labels_B)
    return tokens(items_BxNxD, labels_BxN)


def token_table(items_PxD: jax.Array) -> jax.Array:
    """A pool stored as token rows [item | 0 0], so that building a batch is one gather of whole rows."""
    return jnp.pad(items_PxD, ((0, 0), (0, 2)))


def pooled_sequences(table_PxE: jax.Array, labels_P: jax.Array, ids_BxN: jax.Array):
    """tokens(items[ids], labels[ids]) for table = token_table(items), bit for bit."""
    return _gathered_tokens(table_PxE, ids_BxN, labels_P[ids_BxN].astype(jnp.int32))


def bank_sequences(key: jax.Array, table_PxE: jax.Array, B: int, N: int, query_in_context: bool):
    """K = infinity from a fixed bank of P items: fresh_sequences' construction (N - 1 context items
    with i.i.d. uniform labels drawn anew per sequence, the query copying a uniform context item, or
    drawn independently) with item ids i.i.d. uniform in the bank instead of fresh Gaussians. Labels
    are fresh, so an item's vector says nothing about its label and nothing can be memorized, as with
    fresh items; two context positions share a vector with probability ~ N^2 / 2P per sequence."""
    k_ids, k_labels, k_pos = jax.random.split(key, 3)
    ids_BxN = jax.random.randint(k_ids, (B, N), 0, table_PxE.shape[0])
    labels_BxN = jax.random.randint(k_labels, (B, N), 0, 2)
    if query_in_context:
        pos_Bx1 = jax.random.randint(k_pos, (B, 1), 0, N - 1)
        ids_BxN = ids_BxN.at[:, -1].set(jnp.take_along_axis(ids_BxN, pos_Bx1, axis=1)[:, 0])
        labels_BxN = labels_BxN.at[:, -1].set(jnp.take_along_axis(labels_BxN, pos_Bx1, axis=1)[:, 0])
    return _gathered_tokens(table_PxE, ids_BxN, labels_BxN)


def _gathered_tokens(table_PxE: jax.Array, ids_BxN: jax.Array, labels_BxN: jax.Array):
    """tokens(items[ids], labels) for table = token_table(items): the items from a gather of whole rows, the
    label slots from a gather of a 3-row table (no label, label 0, label 1), chosen by column. Gathering 63-wide
    items and then concatenating the labels wrote the batch twice: 3x slower on CPU (benchmarks/RESULTS.md).
    The choice depends on the column alone: XLA's GPU compile gathers the tokens inside each reduction that
    reads them, so the batch never exists, but a (B, N, E) mask computed from the labels (this function until
    issue 42) it stored and read seven times (tests/test_roofline.py)."""
    N, E = ids_BxN.shape[1], table_PxE.shape[1]
    slots_3xE = np.zeros((3, E), np.float32)
    slots_3xE[1, E - 2] = slots_3xE[2, E - 1] = 1.0
    code_BxN = jnp.where(jnp.arange(N) < N - 1, 1 + labels_BxN, 0)  # the query's label slots stay zero
    item_E = jnp.arange(E) < E - 2
    x_BxNxE = jnp.where(item_E, table_PxE[ids_BxN], jnp.asarray(slots_3xE, table_PxE.dtype)[code_BxN])
    return x_BxNxE, 2.0 * labels_BxN[:, -1].astype(table_PxE.dtype) - 1.0
