"""The persistent compilation cache (icl_race/run/compile_cache.py): where it lives, how it is turned off,
and that a second process loads the first one's programs and gets the same results."""

import json
import os
import subprocess
import sys

import numpy as np
import tiny
from runproc import set_args

from icl_race.run import compile_cache

RAW = tiny.small(task={"K": 200}, ensemble={"seeds": 2, "block": 2})


def test_the_directory_is_per_user_and_host_and_each_switch_is_honoured(tmp_path):
    tag = compile_cache.host_tag()
    assert tag == compile_cache.host_tag() and tag.startswith("jax-")
    assert compile_cache.directory({"HOME": "/h"}) is not None
    assert compile_cache.directory({"XDG_CACHE_HOME": "/x"}) == compile_cache.Path("/x/icl-race") / tag
    assert compile_cache.directory({compile_cache.ENV: str(tmp_path)}) == tmp_path / tag
    for off in ("off", "0", "false", "No", "none", ""):
        assert compile_cache.directory({compile_cache.ENV: off}) is None, off
    # JAX's own setting wins: this module leaves it alone.
    assert compile_cache.directory({"JAX_COMPILATION_CACHE_DIR": "/j", compile_cache.ENV: str(tmp_path)}) is None


def _run(out, env):
    base = out.parent / "base.toml"
    base.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")} | {"JAX_PLATFORMS": "cpu", **env}
    p = subprocess.run(
        [sys.executable, "-m", "icl_race", "run", str(base), "--out", str(out), "--quiet", *set_args(RAW)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return json.loads((out / "meta.json").read_text()), dict(np.load(out / "results.npz"))


def test_a_second_process_loads_the_programs_and_gets_the_same_results(tmp_path):
    cache = tmp_path / "cache"
    meta1, res1 = _run(tmp_path / "a", {compile_cache.ENV: str(cache)})
    meta2, res2 = _run(tmp_path / "b", {compile_cache.ENV: str(cache)})
    assert (cache / compile_cache.host_tag()).is_dir()
    assert meta1["compile_cache_hits"] == 0 and meta2["compile_cache_hits"] >= 1, (meta1, meta2)
    assert meta2["compiles"] == meta1["compiles"], "a loaded program counts as one, as a compiled one does"
    for k in res1:  # two processes on this machine: bit equality holds
        np.testing.assert_array_equal(res1[k], res2[k], err_msg=k)
    meta3, _ = _run(tmp_path / "c", {compile_cache.ENV: "off", "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert meta3["compile_cache_hits"] == 0 and not (tmp_path / "xdg" / "icl-race").exists()


def test_a_cache_directory_open_to_others_is_made_private_and_another_users_is_not_used(tmp_path, monkeypatch, capsys):
    # issue 43: a cache directory of mode 0777 was used as it was (the module made it 0700 only when it
    # created it); anyone who can write it can make a run execute any program.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert compile_cache.private(shared) and shared.stat().st_mode & 0o777 == 0o700
    fresh = tmp_path / "a" / "b"
    assert compile_cache.private(fresh) and fresh.stat().st_mode & 0o777 == 0o700
    monkeypatch.setattr(os, "getuid", lambda: os.stat(shared).st_uid + 1)
    shared.chmod(0o777)
    assert not compile_cache.private(shared)
    assert shared.stat().st_mode & 0o777 == 0o777, "another user's directory is left as it is"
    assert "belongs to another user" in capsys.readouterr().err
