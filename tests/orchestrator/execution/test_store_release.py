"""orchestrator/execution/store_release.py on real files: a node's state dir goes only when its
samples/node-<id>.npz reads back bit for bit equal to what was collected."""

from __future__ import annotations

import numpy as np

from starling.orchestrator.execution.backends.local import state_dir
from starling.orchestrator.execution.store_release import release_local_stores


def _folder(tmp_path, samples, rounds, written):
    (tmp_path / "samples").mkdir()
    for node, values in written.items():
        np.savez(tmp_path / "samples" / f"node-{node}.npz", samples=values, rounds=rounds[node])
    for node in samples:
        store = state_dir(tmp_path / "nodes", node) / "exp" / node
        store.mkdir(parents=True)
        (store / "samples.bin").write_bytes(b"SMPL")


def test_only_nodes_whose_npz_reads_back_equal_are_released(tmp_path):
    rng = np.random.default_rng(0)
    samples = {n: rng.standard_normal((4, 3, 2)) for n in ("0", "1", "2", "3")}
    samples["0"][1, 0, 0] = np.nan  # a diverged value still compares equal to itself
    rounds = {n: np.arange(4) for n in samples}
    written = dict(samples)
    altered = samples["1"].copy()
    altered[3, 2, 1] = np.nextafter(altered[3, 2, 1], np.inf)  # one ulp off
    written["1"] = altered
    del written["2"]  # never written
    _folder(tmp_path, samples, rounds, written)
    rounds["3"] = np.arange(1, 5)  # the npz's rounds differ from the collected ones

    released, kept = release_local_stores(tmp_path, samples, rounds)

    assert released == ["0"] and kept == ["1", "2", "3"]
    assert not state_dir(tmp_path / "nodes", "0").exists()
    for node in kept:
        assert (state_dir(tmp_path / "nodes", node) / "exp" / node / "samples.bin").is_file()
