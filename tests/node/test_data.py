"""Reading a node's private data: LIBSVM / CSV / NPZ files, the built-in digits, shards."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from starling.node.data.builtin import BUILTIN, builtin_bytes, verified
from starling.node.data.files import load_file, read_libsvm, read_table
from starling.node.data.shards import load_shard
from starling.node.models.gaussian_mixture import GaussianMixture
from starling.node.models.logistic_regression import LogisticRegression
from starling.node.models.mlp import MLP
from starling.node.params import ConfigError
from starling.node.spec import DataSpec

LIBSVM_TEXT = """\
+1 1:1 3:0.5 \n\
-1 2:2 # a trailing comment\n\
\n\
# a comment line\n\
+1 qid:7 4:-1.5e-1\n\
-1\n\
"""
EXPECTED_X = np.array(
    [[1, 0, 0.5, 0, 0], [0, 2, 0, 0, 0], [0, 0, 0, -0.15, 0], [0, 0, 0, 0, 0]], dtype=float
)


def _write(path: Path, text: str, compress: bool = False) -> str:
    if compress:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.mark.parametrize("compress", [False, True])
def test_libsvm_reader_on_a_small_file(tmp_path, compress):
    path = _write(tmp_path / ("small.svm" + (".gz" if compress else "")), LIBSVM_TEXT, compress)
    table = read_libsvm(path, n_features=5)
    np.testing.assert_array_equal(table.X, EXPECTED_X)
    np.testing.assert_array_equal(table.y, [1, -1, 1, -1])
    # Without a dimension the width is the largest index seen.
    assert read_libsvm(path).X.shape == (4, 4)
    # The format is recognised from the name, and from the content when the name is silent.
    np.testing.assert_array_equal(read_table(path, "", n_features=5).X, EXPECTED_X)
    plain = _write(tmp_path / ("data.t" + (".gz" if compress else "")), LIBSVM_TEXT, compress)
    np.testing.assert_array_equal(read_table(plain, "", n_features=5).X, EXPECTED_X)


@pytest.mark.parametrize(
    "text, message",
    [
        ("+1 1:1\nabc 2:1\n", "line 2: the label is not a number"),
        ("+1 1:1 2\n", "line 1: expected index:value"),
        ("+1 0:1\n", "indices start at 1"),
        ("+1 1:x\n", "line 1: a pair is not an integer index:number"),
        ("+1 9:1\n", "feature index 9 exceeds the model's 5"),
    ],
)
def test_bad_libsvm_lines_name_data_path_and_the_line(tmp_path, text, message):
    path = _write(tmp_path / "bad.libsvm", text)
    with pytest.raises(ConfigError, match=r"^data\.path: .*" + message.replace("(", r"\(")) as got:
        read_table(path, "libsvm", n_features=5)
    # The line is named, never quoted: an error may travel to whoever configured the node.
    for token in ("abc", "1:x", "2\n"):
        assert token not in str(got.value).split("' line")[1]


def test_bad_files_give_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"^data\.path: no such file"):
        read_table(str(tmp_path / "missing.csv"))
    folder = tmp_path / "a-folder.csv"
    folder.mkdir()
    with pytest.raises(ConfigError, match=rf"^data\.path: '{folder}' is a directory, not a file"):
        read_table(str(folder))
    with pytest.raises(ConfigError, match=r"^data\.format: unknown format 'parquet'"):
        read_table(_write(tmp_path / "a.csv", "1,2\n"), "parquet")
    with pytest.raises(ConfigError, match=r"^data\.format: cannot tell the format"):
        read_table(_write(tmp_path / "mystery", "hello world\n"))
    with pytest.raises(ConfigError, match=r"^data\.path: .*holds no rows"):
        read_table(_write(tmp_path / "empty.libsvm", "# nothing\n"))
    # A bad row is named by its line (comments and blank lines counted), never quoted.
    with pytest.raises(ConfigError, match=r"^data\.path: .*ragged\.csv' line 4: expected 3 "):
        read_table(_write(tmp_path / "ragged.csv", "x,y,z\n1,2,3\n\n4,5\n"))
    with pytest.raises(ConfigError, match=r"line 2: expected 2 numbers") as bad:
        read_table(_write(tmp_path / "word.csv", "1,2\n3,secret\n"))
    assert "secret" not in str(bad.value)
    with pytest.raises(ConfigError, match=r"^data\.path: .*NaN"):
        read_table(_write(tmp_path / "nan.csv", "1,nan\n"))
    broken = tmp_path / "broken.libsvm.gz"
    broken.write_bytes(gzip.compress(b"+1 1:1\n" * 100)[:-30])
    with pytest.raises(ConfigError, match=r"^data\.path: cannot read"):
        read_table(str(broken))
    with pytest.raises(ConfigError, match=r"^data\.path: .*must hold arrays 'X' and 'y'"):
        path = tmp_path / "only_x.npz"
        np.savez(path, X=np.ones((3, 2)))
        read_table(str(path))


def _npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def test_a_damaged_npz_is_named_not_a_traceback(tmp_path):
    """An npz is a zip: one cut short raised BadZipFile, a damaged compressed member
    zlib.error, and a member whose header declares a shape of petabytes MemoryError, each
    past the reader as a traceback (``starling simulate``, a node's --data-file)."""
    whole = _npz_bytes(X=np.arange(2000.0).reshape(1000, 2), y=np.zeros(1000))
    damaged = bytearray(whole)
    for index in range(200, 260):
        damaged[index] ^= 0x55
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**8, 10**8)}
    )
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as archive:
        archive.writestr("X.npy", header.getvalue() + bytes(64))
        archive.writestr("y.npy", _npz_bytes(y=np.zeros(3)))
    cases = {
        "cut.npz": (whole[: len(whole) // 2], "BadZipFile"),
        "not-a-zip.npz": (b"PK\x03\x04 and then nothing of a zip", "BadZipFile"),
        "damaged.npz": (bytes(damaged), "its compressed data is damaged"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    cases["huge.npz"] = (b"", "it declares arrays larger than memory")
    for name, (_, why) in cases.items():
        path = str(tmp_path / name)
        with pytest.raises(
            ConfigError, match=rf"^data\.path: cannot read '{path}' as npz \({why}\)$"
        ):
            read_table(path)


def test_an_npz_of_the_wrong_kind_of_arrays_is_named(tmp_path):
    """A single .npy saved under an .npz name ended in a TypeError traceback (np.load gives
    an array, not an archive); a structured X a TypeError; a complex X lost its imaginary
    part with only a warning, and the run went on."""
    single = tmp_path / "single.npz"
    with open(single, "wb") as handle:
        np.save(handle, np.zeros((5, 2)))
    np.savez(tmp_path / "complex.npz", X=np.ones((5, 2)) * 1j, y=np.zeros(5))
    np.savez(tmp_path / "fields.npz", X=np.zeros(5, dtype=[("a", "f8")]), y=np.zeros(5))
    np.savez(tmp_path / "text.npz", X=np.ones((5, 2)), y=np.array(["yes"] * 5))
    cases = {
        "single.npz": " holds a single array \\(.npy\\), not an npz archive of arrays 'X' and 'y'",
        "complex.npz": ": array 'X' holds complex128 values, expected real numbers",
        "fields.npz": ": array 'X' holds .* values, expected real numbers",
        "text.npz": ": array 'y' holds <U3 values, expected real numbers",
    }
    for name, needle in cases.items():
        path = str(tmp_path / name)
        with pytest.raises(ConfigError, match=rf"^data\.path: '{path}'{needle}$"):
            read_table(path)


def test_csv_and_npz(tmp_path):
    csv = _write(tmp_path / "t.csv", "a,b,label\n1,2,0\n3,4,1\n")
    table = read_table(csv)
    np.testing.assert_array_equal(table.X, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(table.y, [0, 1])
    # Density models take every column as an observation.
    np.testing.assert_array_equal(read_table(csv, targets=False).X, [[1, 2, 0], [3, 4, 1]])
    npz = tmp_path / "t.npz"
    np.savez(npz, X=np.arange(6.0).reshape(3, 2), y=np.array([0.0, 1.0, 1.0]))
    assert read_table(str(npz)).X.shape == (3, 2)


def test_width_is_checked_against_the_model(tmp_path):
    csv = _write(tmp_path / "t.csv", "1,2,0\n3,4,1\n")
    with pytest.raises(ConfigError, match=r"^data\.path: .*2 feature columns .* expects 3"):
        load_file(csv, "", LogisticRegression(features=3))
    one_column = _write(tmp_path / "gmm.csv", "0.5\n-1.0\n2.0\n")
    assert load_file(one_column, "", GaussianMixture()).X.shape == (3, 1)


def test_file_shards_partition_the_rows(tmp_path):
    path = _write(tmp_path / "d.libsvm", "".join(f"{(-1) ** k} 1:{k}\n" for k in range(10)))
    model = LogisticRegression(features=2)
    shards = [
        load_shard(DataSpec("file", shard=s, num_shards=3, path=path), model) for s in range(3)
    ]
    firsts = np.concatenate([s.X[:, 0] for s in shards])
    assert sorted(firsts) == list(range(10)) and shards[0].X.shape[1] == 2
    with pytest.raises(ConfigError, match=r"^data\.path: .*too few for 20 nodes"):
        load_shard(DataSpec("file", shard=15, num_shards=20, path=path), model)
    # Ten rows are enough for five nodes; a 0.9 held-out split leaves one. The line said
    # only "has 10 rows, too few for 5 nodes", and the user counted ten.
    split = DataSpec("file", shard=4, num_shards=5, path=path, test_fraction=0.9)
    with pytest.raises(
        ConfigError,
        match=r"^data\.path: .* has 10 rows, 1 of them left for training by "
        r"evaluation\.test\.split, too few for 5 nodes$",
    ):
        load_shard(split, model)


def test_builtin_digits():
    table = read_table("builtin:digits")
    assert table.X.shape == (1797, 64) and table.X.min() == 0 and table.X.max() == 1
    assert np.bincount(table.y.astype(int)).tolist() == [
        178,
        182,
        177,
        183,
        181,
        182,
        181,
        179,
        174,
        180,
    ]
    assert load_file("builtin:digits", "", MLP()).X.shape == (1797, 64)
    with pytest.raises(ConfigError, match=r"^data\.path: unknown built-in"):
        read_table("builtin:mnist")


def test_shipped_a9a_train_and_test():
    """The a9a copies shipped in the package: row and label counts of their README."""
    table = read_table("builtin:a9a", n_features=123)
    assert table.X.shape == (32561, 123)
    assert int((table.y == 1).sum()) == 7841 and int((table.y == -1).sum()) == 24720
    assert table.X.sum() == 451592  # every non-zero is a 1 (datasets/README.md)
    assert set(np.unique(table.X)) == {0.0, 1.0}
    test = load_file("builtin:a9a.t", "", LogisticRegression(features=123))
    assert test.X.shape == (16281, 123) and test.X[:, 122].sum() == 0
    assert int((test.y == 1).sum()) == 3846 and int((test.y == -1).sum()) == 12435


def test_a_damaged_shipped_file_is_refused():
    raw = builtin_bytes("a9a")
    assert verified(raw, BUILTIN["a9a"][1], "builtin:a9a") is raw
    damaged = raw[:-1] + bytes([raw[-1] ^ 1])
    with pytest.raises(ConfigError, match=r"^data\.path: the shipped file of builtin:a9a fails"):
        verified(damaged, BUILTIN["a9a"][1], "builtin:a9a")


def test_a_file_is_parsed_once_per_version_and_shared_read_only(tmp_path):
    path = _write(tmp_path / "c.csv", "1,2,0\n3,4,1\n")
    first, second = read_table(path), read_table(path)
    assert first is second  # the simulator's nodes share one parse
    with pytest.raises(ValueError):
        first.X[0, 0] = 9.0
    _write(tmp_path / "c.csv", "1,2,0\n3,4,1\n5,6,1\n")  # a new version is read again
    assert len(read_table(path)) == 3
