"""The seed axis over local devices: plain jit on inputs placed with a NamedSharding (GSPMD).

Not shard_map: under its default check_vma, parameters created inside the body from constants are
typed device-invariant and their gradients get summed across devices (see jax-ecosystem.md §3).
"""

from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec


def local_device_count(requested: int) -> int:
    """`requested` devices, or all local ones for 0."""
    n = len(jax.local_devices())
    if requested > n:
        from icl_race.config import ConfigError

        raise ConfigError(f"ensemble.devices = {requested}: must be 0 (all) or <= {n}, the local device count")
    return requested or n


def seed_mesh(shards: int):
    """A 1-D mesh named "seed" over the first `shards` local devices (Auto axis: no mesh context needed)."""
    return jax.make_mesh((shards,), ("seed",), axis_types=(jax.sharding.AxisType.Auto,),
                         devices=jax.local_devices()[:shards])


def place(carry, consts, mesh):
    """Split every carry leaf along its leading seed axis; replicate the shared constants."""
    if mesh is None:
        return carry, consts
    seed, everywhere = NamedSharding(mesh, PartitionSpec("seed")), NamedSharding(mesh, PartitionSpec())
    return jax.device_put(carry, seed), jax.device_put(consts, everywhere)
