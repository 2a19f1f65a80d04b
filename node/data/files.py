"""The files a node reads its data from, and the data sets shipped with it, as tables.

File formats (``data.format``; guessed from the name, then the content, when empty):

* ``npz`` — arrays ``X`` (n, p) and ``y`` (n,) (``y`` optional for density models);
* ``csv`` — numbers separated by commas, one row per line, an optional header line;
  the last column is the target for supervised models, density models take every column;
* ``libsvm`` (also ``svmlight``) — sparse ``<label> <index>:<value> ...`` lines with
  1-based indices, as the LIBSVM binary-classification sets (a9a, covtype) are published.
  Columns a row leaves out are zero; the width is the model's ``num_features`` (123 for
  a9a: its test split never mentions feature 123, so a width read off the file would
  differ between splits). ``qid:`` tokens and ``#`` comments are ignored.

Any of these may be gzip-compressed (``.gz``). ``builtin:NAME`` names a data set shipped in
``node/models/datasets`` and checked against its sha256 (:mod:`starling.node.data.builtin`):
``digits`` (UCI optical digits, pixels scaled to [0, 1]), ``a9a`` and ``a9a.t``.

Which of a table's rows a node holds is :mod:`starling.node.data.shards`.
"""

from __future__ import annotations

import functools
import gzip
import io
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from starling.node.data.builtin import builtin_bytes
from starling.node.models.base import Dataset, Model
from starling.node.params import ConfigError, existing_file

__all__ = [
    "load_builtin",
    "load_file",
    "parse_libsvm_lines",
    "read_libsvm",
    "read_table",
]

FORMATS = ("npz", "csv", "libsvm")
_ALIASES = {"svmlight": "libsvm", "svm": "libsvm", "libsvm": "libsvm", "csv": "csv", "npz": "npz"}
_LIBSVM_TOKEN = re.compile(r"^\S+(\s+\d+:\S+)+\s*$")


def load_file(path: str, fmt: str, model: Model, field: str = "data") -> Dataset:
    """A whole file read for ``model``: width checked against its ``num_features``.

    Also the way to read a held-out file (e.g. a9a.t) for evaluation: ``field`` is the
    section whose ``path`` and ``format`` errors name (``evaluation.test``).
    """
    width = getattr(model, "num_features", None)
    supervised = getattr(model, "supervised", True)
    table = read_table(path, fmt, n_features=width, targets=supervised, field=field)
    if width is not None and table.X.shape[1] != width:
        raise ConfigError(
            f"{field}.path: {path!r} has {table.X.shape[1]} feature columns but the model "
            f"expects {width}"
        )
    return table


def read_table(
    path: str,
    fmt: str = "",
    n_features: int | None = None,
    targets: bool = True,
    field: str = "data",
) -> Dataset:
    """Read features and targets from a file (see the module docstring for the formats).

    ``n_features`` fixes the width of LIBSVM rows; ``targets=False`` reads every column of
    a CSV as an observation (``y`` is then zeros). Errors name ``<field>.path`` or
    ``<field>.format``.
    """
    if path.startswith("builtin:"):
        return load_builtin(path.removeprefix("builtin:"), n_features)
    file = existing_file(path, f"{field}.path")
    fmt = _format(file, fmt, field)
    stat = file.stat()
    return _read_cached(path, stat.st_mtime_ns, stat.st_size, fmt, n_features, targets, field)


_UNREADABLE = (
    OSError,
    EOFError,
    UnicodeDecodeError,
    ValueError,
    zipfile.BadZipFile,
    zlib.error,
    MemoryError,
)
"""What a damaged or hostile file raises while it is parsed. An npz is a zip: one cut short
or not a zip at all raised BadZipFile, a damaged compressed member zlib.error, and a member
whose header declares a shape of terabytes MemoryError, each a traceback instead of a line
naming data.path."""


@functools.lru_cache(maxsize=4)
def _read_cached(
    path: str,
    mtime_ns: int,
    size: int,
    fmt: str,
    n_features: int | None,
    targets: bool,
    field: str,
) -> Dataset:
    """One parse per file version and process: the simulator builds every node in one
    process, and each node (and the evaluation) reads the same file for its own rows.
    The arrays are read-only so that no caller can change what the next one gets."""
    file = Path(path)
    try:
        if fmt == "npz":
            table = _read_npz(file, targets, field)
        elif fmt == "csv":
            table = _read_csv(file, targets, field)
        else:
            table = read_libsvm(path, n_features, field)
    except _UNREADABLE as exc:
        if isinstance(exc, ConfigError):
            raise
        # The parser's own message may quote the file: name only the kind of failure.
        if isinstance(exc, MemoryError):
            why = "it declares arrays larger than memory"
        elif isinstance(exc, zlib.error):
            why = "its compressed data is damaged"
        else:
            why = type(exc).__name__
        raise ConfigError(f"{field}.path: cannot read {path!r} as {fmt} ({why})") from None
    if len(table) == 0:
        raise ConfigError(f"{field}.path: {path!r} holds no rows")
    if not (np.all(np.isfinite(table.X)) and np.all(np.isfinite(table.y))):
        raise ConfigError(f"{field}.path: {path!r} contains NaN or infinite values")
    table.X.setflags(write=False)
    table.y.setflags(write=False)
    return table


def read_libsvm(path: str, n_features: int | None = None, field: str = "data") -> Dataset:
    """Parse LIBSVM / SVMlight sparse text (optionally gzip) into a dense ``Dataset``.

    Raw labels are kept (``±1`` stays ``±1``); classifiers map them to classes.
    """
    with _open_text(Path(path)) as handle:
        return parse_libsvm_lines(handle, path, n_features, field)


def parse_libsvm_lines(
    lines: Iterable[str], path: str, n_features: int | None = None, field: str = "data"
) -> Dataset:
    """LIBSVM lines (``path`` and ``field`` only name them in errors) as a dense ``Dataset``."""
    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        where = f"{field}.path: {path!r} line {number}"
        try:
            label = float(tokens[0])
        except ValueError:
            raise ConfigError(f"{where}: the label is not a number") from None
        row = len(labels)
        labels.append(label)
        for token in tokens[1:]:
            index, colon, value = token.partition(":")
            if not colon:
                raise ConfigError(f"{where}: expected index:value pairs after the label")
            if index == "qid":
                continue
            try:
                column, number_value = int(index), float(value)
            except ValueError:
                raise ConfigError(f"{where}: a pair is not an integer index:number") from None
            if column < 1:
                raise ConfigError(f"{where}: feature indices start at 1, got {column}")
            if n_features is not None and column > n_features:
                raise ConfigError(
                    f"{where}: feature index {column} exceeds the model's {n_features} "
                    "features (model.params)"
                )
            rows.append(row)
            cols.append(column - 1)
            values.append(number_value)
    width = n_features if n_features is not None else (max(cols) + 1 if cols else 0)
    X = np.zeros((len(labels), width))
    X[np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = values
    return Dataset(X=X, y=np.asarray(labels, dtype=float))


@functools.lru_cache(maxsize=4)
def load_builtin(name: str, n_features: int | None = None) -> Dataset:
    """A shipped data set as a read-only ``Dataset`` (one parse per process)."""
    raw = builtin_bytes(name)
    if name == "digits":
        with np.load(io.BytesIO(raw)) as arrays:
            # Pixel counts 0..16 scaled to [0, 1], so a N(0, 1) weight prior is sensible.
            table = Dataset(X=arrays["X"] / 16.0, y=arrays["y"].astype(float))
    else:
        text = gzip.decompress(raw).decode("utf-8").splitlines()
        table = parse_libsvm_lines(text, f"builtin:{name}", n_features)
    table.X.setflags(write=False)
    table.y.setflags(write=False)
    return table


def _format(file: Path, fmt: str, field: str) -> str:
    if fmt:
        key = fmt.lower()
        if key not in _ALIASES:
            raise ConfigError(f"{field}.format: unknown format {fmt!r} (use {', '.join(FORMATS)})")
        return _ALIASES[key]
    name = file.name.lower().removesuffix(".gz")
    suffix = Path(name).suffix.lstrip(".")
    if suffix in _ALIASES:
        return _ALIASES[suffix]
    return _sniff(file, field)


def _sniff(file: Path, field: str) -> str:
    """Guess from the first data line: ``label i:v ...`` is LIBSVM, commas mean CSV."""
    try:
        with open(file, "rb") as raw:
            if raw.read(2) == b"PK":  # a zip archive: what numpy's savez writes
                return "npz"
        with _open_text(file) as handle:
            for text in handle:
                line = text.split("#", 1)[0].strip()
                if not line:
                    continue
                if _LIBSVM_TOKEN.match(line):
                    return "libsvm"
                if "," in line:
                    return "csv"
                break
    except (OSError, EOFError, UnicodeDecodeError):
        pass
    raise ConfigError(
        f"{field}.format: cannot tell the format of {str(file)!r}; set it to one of "
        f"{', '.join(FORMATS)}"
    )


@contextmanager
def _open_text(file: Path) -> Iterator[io.TextIOBase]:
    """Text lines of ``file``, decompressing gzip (recognised by its magic bytes)."""
    with open(file, "rb") as raw:
        magic = raw.read(2)
    if magic == b"\x1f\x8b":
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            yield handle
    else:
        with open(file, encoding="utf-8") as handle:
            yield handle


def _read_npz(file: Path, targets: bool, field: str) -> Dataset:
    wanted = "'X' and 'y'" if targets else "'X'"
    # Opened here: np.load(path) leaves its file open when the zip cannot be read.
    with open(file, "rb") as handle:
        arrays = np.load(handle)
        if not isinstance(arrays, np.lib.npyio.NpzFile):  # one .npy array, not an archive
            raise ConfigError(
                f"{field}.path: {str(file)!r} holds a single array (.npy), not an npz "
                f"archive of arrays {wanted}"
            )
        if "X" not in arrays or (targets and "y" not in arrays):
            raise ConfigError(f"{field}.path: {str(file)!r} must hold arrays {wanted}")
        X = _real_array(arrays, "X", file, field)
        y = _real_array(arrays, "y", file, field) if "y" in arrays else np.zeros(X.shape[:1])
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ConfigError(
            f"{field}.path: {str(file)!r}: X must be (n, p) and y (n,), got {X.shape} and {y.shape}"
        )
    return Dataset(X=X, y=y)


def _real_array(arrays: Any, name: str, file: Path, field: str) -> np.ndarray:
    """Array ``name`` of an npz as float64, or a ConfigError naming its dtype: a complex
    array lost its imaginary part with only a warning, a structured one was a TypeError."""
    array = arrays[name]
    if array.dtype.kind not in "biuf":
        raise ConfigError(
            f"{field}.path: {str(file)!r}: array {name!r} holds {array.dtype} values, "
            "expected real numbers"
        )
    return np.asarray(array, dtype=float)


def _read_csv(file: Path, targets: bool, field: str) -> Dataset:
    with _open_text(file) as handle:
        lines = [
            (number, line)
            for number, line in enumerate(handle, 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    if lines and not _numeric(lines[0][1]):
        lines = lines[1:]  # a header
    if not lines:
        return Dataset(X=np.zeros((0, 0)), y=np.zeros(0))
    try:
        table = np.loadtxt([line for _, line in lines], delimiter=",", ndmin=2)
    except ValueError:
        _name_bad_line(file, lines, field)
        raise
    if not targets:
        return Dataset(X=table, y=np.zeros(len(table)))
    if table.shape[1] < 2:
        raise ConfigError(
            f"{field}.path: {str(file)!r} needs feature columns and a last column of targets"
        )
    return Dataset(X=table[:, :-1], y=table[:, -1])


def _name_bad_line(file: Path, lines: list[tuple[int, str]], field: str) -> None:
    """Raise a ConfigError naming the first row unlike the first one (by its line number,
    never its content: the file is private data)."""
    width = len(lines[0][1].split(","))
    for number, line in lines:
        if len(line.split(",")) != width or not _numeric(line):
            raise ConfigError(
                f"{field}.path: {str(file)!r} line {number}: expected {width} numbers "
                "separated by commas, like the first row"
            )


def _numeric(line: str) -> bool:
    try:
        [float(token) for token in line.split(",")]
    except ValueError:
        return False
    return True
