"""The seed axis over local devices: a NamedSharding of every carry leaf, and on each device the same
single-device executable run on its own shard.

Why not one GSPMD program (jit over the globally sharded arrays): measured on 4 CPU devices, the SPMD
partitioner fuses the per-device program differently from the single-device one, which rounds some
values 1 ulp apart, and the ICL transition amplifies that into different t_ICL after a few hundred
steps. Seeds never interact, so running the single-device executable on each shard (dispatched
asynchronously, so the devices work at once) computes exactly what one device would, bit for bit.
Not shard_map either: under its default check_vma, parameters created inside the body from constants
are typed device-invariant and their gradients get summed across devices.
"""

from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec


def local_device_count() -> int:
    return len(jax.local_devices())


def seed_mesh(shards: int):
    """A 1-D mesh named "seed" over the first `shards` local devices (Auto axis: no mesh context needed)."""
    return jax.make_mesh(
        (shards,), ("seed",), axis_types=(jax.sharding.AxisType.Auto,), devices=jax.local_devices()[:shards]
    )


def place(carry, consts, shards: int):
    """Split every carry leaf along its leading seed axis over the first `shards` devices; replicate
    the shared constants there. On one device both stay as they are."""
    if shards == 1:
        return carry, consts
    mesh = seed_mesh(shards)
    seed, everywhere = NamedSharding(mesh, PartitionSpec("seed")), NamedSharding(mesh, PartitionSpec())
    return jax.device_put(carry, seed), jax.device_put(consts, everywhere)


def _on(device, tree):
    """The part of each multi-device leaf that lives on `device` (a view, no copy); other leaves as they are."""

    def local(a):
        if not isinstance(a, jax.Array) or len(a.sharding.device_set) == 1:
            return a
        return next(s.data for s in a.addressable_shards if s.device == device)

    return jax.tree.map(local, tree)


def on_each_device(fn, carry, *args):
    """fn(carry, *args) for a carry whose leaves are split along the seed axis by a NamedSharding
    (see `place`): fn runs on each device's shard, and the per-device results, whose leaves all have
    the seed axis first, are joined into global arrays with the same sharding. For a carry on one
    device it is just fn(carry, *args)."""
    sharding = jax.tree.leaves(carry)[0].sharding
    if len(sharding.device_set) == 1:
        return fn(carry, *args)
    devices = list(sharding.mesh.devices.flat)  # mesh order = order of the shards along the seed axis
    # Take every device's views before the first call: fn may donate its carry, which deletes the
    # global array the later views would come from.
    shares = [(_on(d, carry), _on(d, args)) for d in devices]
    parts = [fn(c, *a) for c, a in shares]

    def join(*leaves):
        shape = (sum(a.shape[0] for a in leaves), *leaves[0].shape[1:])
        return jax.make_array_from_single_device_arrays(shape, sharding, list(leaves))

    return jax.tree.map(join, *parts)
