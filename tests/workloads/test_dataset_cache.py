"""Generated datasets kept on disk between processes are exactly the generated ones."""

from __future__ import annotations

import numpy as np

from asicsim.workloads import datasets


def test_mnist1d_from_the_cache_equals_a_fresh_generation(tmp_path, monkeypatch):
    from mnist1d.data import get_dataset_args, make_dataset

    monkeypatch.setenv("ASICSIM_CACHE_DIR", str(tmp_path))
    first = datasets._mnist1d()  # generates and writes the cache
    (cached,) = list(tmp_path.glob("mnist1d-*.npz"))
    again = datasets._mnist1d()  # reads it
    fresh = make_dataset(get_dataset_args())
    for ours, theirs in (("x_train", "x"), ("y_train", "y"), ("x_test", "x_test"), ("y_test", "y_test")):
        ref = np.asarray(fresh[theirs]).astype(getattr(first, ours).dtype)
        assert np.array_equal(getattr(first, ours), ref)
        assert np.array_equal(getattr(again, ours), ref)
    cached.write_bytes(b"not an npz")  # a damaged cache is regenerated, not trusted
    assert np.array_equal(datasets._mnist1d().x_train, first.x_train)
