"""The sealing key and the folder that holds it, under the conditions a user meets: a key
file made by another user, a damaged one, a home that cannot be made; and the umask the
``starling`` command writes with, which the orchestrator image loosens on purpose.

Real files and the real command, in a fresh interpreter where the umask matters."""

from __future__ import annotations

import os
import stat

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.core.home import starling_home
from starling.orchestrator.core.seals import check_seal, key_path, sealed
from tests.conftest import ROOT, run_cli

QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def test_a_record_sealed_here_is_trusted_and_a_changed_one_is_not(tmp_path, starling_home):
    record = sealed({"nodes": {"a": "127.0.0.1:5000"}})
    check_seal(record, tmp_path / "run.json", "dial")
    assert stat.S_IMODE(key_path().stat().st_mode) == 0o600
    with pytest.raises(ConfigError, match="seal does not match"):
        check_seal({**record, "nodes": {"a": "10.0.0.9:5000"}}, tmp_path / "run.json", "dial")


def test_a_blank_home_is_the_default_not_the_working_folder(monkeypatch):
    monkeypatch.setenv("STARLING_HOME", "  ")
    assert starling_home() == starling_home().home() / ".starling"


def test_a_damaged_key_is_one_line_when_sealing_and_no_trust_when_checking(tmp_path, starling_home):
    record = sealed({"run": 1})
    key_path().write_bytes(b"short")
    with pytest.raises(ConfigError, match=r"record\.key: .*holds 5 bytes"):
        sealed({"run": 2})
    with pytest.raises(ConfigError, match="seal does not match"):
        check_seal(record, tmp_path / "run.json", "dial")


def test_a_key_that_cannot_be_read_or_made_names_the_file(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        blocked = tmp_path / "a-file-not-a-folder"  # root reads any file: block by shape
        blocked.write_text("")
        monkeypatch.setenv("STARLING_HOME", str(blocked / "home"))
    else:
        home = tmp_path / "home"
        home.mkdir(mode=0o500)
        monkeypatch.setenv("STARLING_HOME", str(home))
    with pytest.raises(ConfigError, match=r"record\.key: the key that seals .*STARLING_HOME"):
        sealed({"run": 1})
    with pytest.raises(ConfigError, match="seal does not match"):
        check_seal({"run": 1, "seal": "00"}, tmp_path / "run.json", "dial")


@pytest.mark.e2e  # the umask is the process's: a fresh `starling`
@pytest.mark.parametrize(("asked", "mode"), [(None, 0o600), ("000", 0o666), ("027", 0o640)])
def test_results_are_owner_only_unless_starling_umask_asks(tmp_path, asked, mode):
    env = {"STARLING_UMASK": asked} if asked is not None else {}
    out = tmp_path / "out"
    made = run_cli("simulate", str(QUICKSTART), "--out", str(out), env=env)
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((out / "metrics.json").stat().st_mode) == mode
    assert stat.S_IMODE(out.stat().st_mode) == mode | (mode & 0o444) >> 2  # folders: +x


@pytest.mark.e2e
@pytest.mark.parametrize("asked", ["999", "rw", "-1", "", "0x7", "7 7"])
def test_a_bad_starling_umask_is_one_line_naming_it(tmp_path, asked):
    said = run_cli(
        "simulate", str(QUICKSTART), "--out", str(tmp_path / "out"), env={"STARLING_UMASK": asked}
    )
    assert said.returncode == 2
    assert said.stderr.startswith("starling: STARLING_UMASK: expected an octal umask"), said.stderr
    assert len(said.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("where", "mode", "said"),
    [
        ("key", 0o644, r"others may read or write the key \(mode 644\)"),
        ("key", 0o660, r"others may read or write the key \(mode 660\)"),
        ("folder", 0o777, r"others may write in its folder \(mode 777\)"),
        ("folder", 0o730, r"others may write in its folder \(mode 730\)"),
    ],
)
def test_a_key_others_may_read_or_replace_seals_nothing_and_trusts_nothing(
    tmp_path, starling_home, where, mode, said
):
    """A key made in a shared folder before the user's first run (a results volume anyone
    may write), or one left readable, would let another user seal records this one trusts."""
    record = sealed({"nodes": {"a": "127.0.0.1:5000"}})
    (key_path() if where == "key" else key_path().parent).chmod(mode)
    with pytest.raises(ConfigError, match=r"record\.key: the key that seals .*" + said):
        sealed({"run": 2})
    with pytest.raises(ConfigError, match="seal does not match"):
        check_seal(record, tmp_path / "run.json", "dial")
    (key_path() if where == "key" else key_path().parent).chmod(0o600 if where == "key" else 0o700)
    check_seal(record, tmp_path / "run.json", "dial")  # private again: trusted again
