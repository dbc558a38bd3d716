"""The levers' collapse inspection (issue 14 item 4 (c)), printed lines and JSON in experiments/levers/results/.

  python experiments/levers/analyze.py collapse runs/levers/epsilon_kinf_long --name collapse_eps1

The other subcommands this script had (beta0, pair, race, transience, kstar, ceiling) are now
`icl-race analyze levers SUBCOMMAND ...` (icl_race/studies/levers.py, icl_race/analysis/levers.py,
icl_race/theory/ceiling.py; `icl-race analyze --help`). collapse stays here for now: it retrains a seed
(jax), which the analysis commands do not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from icl_race.configbase import ConfigError
from icl_race.rundir import load_cells

RESULTS = Path(__file__).parent / "results"


def collapse(args) -> dict:
    """(c): what a run's network looks like along its training, one seed of a finished cell retrained alone
    (icl_race.retrain) in vmaps of one seed, the fast CPU layout this was first written with, so the same
    trajectory as inside its ensemble to float tolerance (without the ensemble.block override: exactly
    its run's, at the cost of a whole block): at each of --at steps the ICL accuracy and training loss,
    the spread of the query's attention logits over its context, the fraction of each MLP layer's ReLUs
    active on a training batch, and the mean |logit|. Written for epsilon = 1 at K = infinity, where ICL
    rose and then the training loss went back to ln 2 with nothing to memorize."""
    import jax
    import jax.numpy as jnp

    from icl_race import load, systems
    from icl_race.retrain import retrain
    from icl_race.rundir import SweepDir

    found = load(args.dir)
    runs = found.runs if isinstance(found, SweepDir) else [found]
    if len(runs) != 1:
        raise SystemExit(f"error: {args.dir}: collapse needs a directory with one finished cell, found {len(runs)}")
    kept = {}  # step -> the seed's parameters, copied before the next chunk donates the carry

    def keep(p):
        if p.step in args.at:
            kept[p.step] = jax.device_get(jax.tree.map(lambda a: a[0], p.carry["state"]["params"]))

    # One evaluation per chunk, at every multiple of the --at steps' gcd, and no early stop: each --at step
    # is a chunk boundary, where `keep` looks.
    res = retrain(runs[0].dir, [args.seed], steps=max(args.at), on_chunk=keep,
                  overrides=["ensemble.block=1", "ensemble.devices=0", f"train.eval_every={np.gcd.reduce(args.at)}",
                             "train.evals_per_chunk=1", "train.stop_when_all_acquired=false"])
    program, consts = systems.build(runs[0].cfg)
    out = {"dir": args.dir, "seed": args.seed, "rows": []}
    for stop, params in sorted(kept.items()):
        i = int(np.searchsorted(res["eval_steps"], stop))
        # The forward pass spelled out (unfolded LayerNorm), for the hidden activations the model's
        # __call__ does not return.
        m = program.model.bind(params)
        x_BxNxE, _ = program.train_batch({"params": params}, consts, jax.random.key(stop), 512)
        h_BxNxE = m.ln(x_BxNxE)
        h1_BxW = jax.nn.relu(m.mlp.fc1(h_BxNxE[:, -1] + m.attn.query(h_BxNxE)))
        h2_BxW = jax.nn.relu(m.mlp.fc2(h1_BxW))
        row = {"step": stop, "icl_acc": float(res["icl_acc"][0, i]), "train_loss": float(res["train_loss"][0, i]),
               "score_spread": float(jnp.std(m.attn.query_scores(h_BxNxE), -1).mean()),
               "relu_active_fc1": float((h1_BxW > 0).mean()), "relu_active_fc2": float((h2_BxW > 0).mean()),
               "logit_abs": float(jnp.abs(m.mlp.fc3(h2_BxW)).mean())}
        out["rows"].append(row)
        print(f"step {stop}: ICL accuracy {row['icl_acc']:.3f}, training loss {row['train_loss']:.3f}; attention "
              f"logit spread {row['score_spread']:.1f}; ReLUs active {row['relu_active_fc1']:.2f} (layer 1), "
              f"{row['relu_active_fc2']:.2f} (layer 2); mean |logit| {row['logit_abs']:.3f}")
    return _write(args.name or "collapse", out)


def _write(name: str, out: dict) -> dict:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(f"wrote {RESULTS / name}.json")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("collapse", help="(c) one seed of a cell retrained alone, its network inspected along the way")
    p.add_argument("dir", help="a sweep directory with one cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--at", type=int, nargs="+", default=[3000, 6000, 9000, 12000, 18000, 24000, 30000])
    p.add_argument("--name", help="results/<name>.json (default: the subcommand's name)")
    args = ap.parse_args()
    try:
        {"collapse": collapse}[args.what](args)
    except ConfigError as e:  # a missing or unreadable directory: one line, as the CLI says it
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
