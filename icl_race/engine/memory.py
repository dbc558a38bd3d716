"""How much memory a run will need, estimated before anything is allocated (what there is to hold it:
icl_race/run/host.py).

Everything the engine keeps comes from `jax.eval_shape` of the program's own functions, so nothing
is materialised, however absurd the sizes: the per-seed state (parameters, optimizer state, label
maps, per-seed data sets) of every seed on a device, the constants every seed shares (item pools,
data sets, moments), and the probes of one evaluation, kept on the host for every evaluation of the
run. What a step computes in between (batches, activations, evaluation sets) is known only to the
system: a program says it with `work_bytes()` (bytes of one seed's largest live intermediates; 0 by
default, engine/program.py); the engine adds the gradient and the updated copy of the state, times one
vmap block.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icl_race.engine.ensemble import Layout, _init_seed
from icl_race.engine.kept import copies
from icl_race.engine.program import Consts, Program


def tree_bytes(tree) -> int:
    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree.leaves(tree))


@dataclass(frozen=True)
class Estimate:
    seeds: int  # seeds on each device, padding included
    shards: int  # devices
    state: int  # bytes of one seed's state
    consts: int  # bytes shared by every seed, on each device
    work: int  # bytes of one block's intermediates (block x (work_bytes + 2 x state)), on each device
    history: int  # host bytes of the whole ensemble's probes over the run
    copies: int  # host bytes of the ensemble's state copied out for a checkpoint (and by orbax's writer)
    on_cpu: bool  # the devices' memory is the host's
    params: int = 0  # bytes of one seed's parameters (`Program.params`), when train.keep_params keeps any
    kept: int = 0  # host bytes of the parameters train.keep_params writes (the run's seeds, each kind)

    def host_parts(self) -> dict[str, int]:
        parts = {"probe history": self.history, "checkpoint copies": self.copies}
        return parts | ({"kept parameters": self.kept} if self.kept else {})

    def parts(self) -> dict[str, int]:
        """Bytes by kind: on one device, or on a CPU over all devices and the host's own."""
        n = self.shards if self.on_cpu else 1
        parts = {
            "seed states": n * self.seeds * self.state,
            "shared constants": n * self.consts,
            "one block's work": n * self.work,
        }
        return parts | (self.host_parts() if self.on_cpu else {})

    @property
    def device(self) -> int:
        return sum(self.parts().values())


def abstract_build(build):
    """(program, abstract consts) of `build() -> (program, consts)` without computing the consts."""
    box = {}

    def consts_only():
        box["program"], consts = build()
        return consts

    consts = jax.eval_shape(consts_only)
    return box["program"], consts


def estimate(
    program: Program,
    consts: Consts,
    *,
    layout: Layout,
    seeds: int,
    evals: int,
    checkpoints: bool,
    on_cpu: bool,
    kept: tuple[str, ...] = (),
) -> Estimate:
    """The memory of `seeds` seeds of `program` laid out by `layout`, evaluated `evals` times (call inside
    the system's precision context), with abstract `consts` (from `abstract_build`); `kept`: the parameters
    train.keep_params keeps ("at_t_icl" rides in the carry, engine/kept.py)."""
    seeds_per_device = -(-seeds // layout.unit) * layout.block
    key = jax.eval_shape(lambda: jax.random.key(0))
    seed = jax.eval_shape(lambda k, c: _init_seed(program, c, k), key, consts)  # the state, key, first passages
    probes = jax.eval_shape(program.probe, seed["state"], consts, key)
    # Read only when kept: a system whose state names its parameters otherwise (a registered one) has no "params".
    params_b = tree_bytes(program.params(seed["state"])) if kept else 0
    state_b = tree_bytes(seed) + (copies(program) * params_b if "at_t_icl" in kept else 0)
    work = program.work_bytes()
    per_eval = tree_bytes(probes) + jnp.dtype(jnp.float32).itemsize  # + train_loss
    return Estimate(
        seeds=seeds_per_device,
        shards=layout.shards,
        state=state_b,
        consts=tree_bytes(consts),
        work=layout.block * (work + 2 * state_b),
        history=seeds * evals * per_eval,
        copies=2 * seeds_per_device * layout.shards * state_b if checkpoints else 0,
        on_cpu=on_cpu,
        params=params_b,
        kept=seeds * len(kept) * params_b,
    )
