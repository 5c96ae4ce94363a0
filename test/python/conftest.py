"""Fixtures of the Python package's tests (test/python; docs/python.md).

Run by CTest twice: against the package laid out in the build tree (PYTHONPATH=build/python)
and against the wheel installed into a fresh virtual environment (wheel_test.sh). The
environment says where things are:
  ETC_TEST_CLI              the etc CLI to compare with (default: the package's own)
  ETC_TEST_SOURCE           the source tree (examples/)
  ETC_TEST_TORCH_FIXTURES   build/torch-fixtures (scripts/make-torch-fixtures.py)
  ETC_TEST_DECODER_FIXTURES build/decoder-fixtures (scripts/make-decoder-fixtures.py)
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import etc
from etc import _cli


@pytest.fixture(scope="session", autouse=True)
def _the_package_under_test():
    """The etc imported is the one under test (the installed wheel, or the build tree's)."""
    prefix = os.environ.get("ETC_TEST_PACKAGE_PREFIX")
    if prefix:
        assert etc.__file__.startswith(prefix), f"testing {etc.__file__}, not the package under {prefix}"


def _env_path(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"${name} is not set (see test/python/conftest.py)")
    return Path(value)


@pytest.fixture(scope="session")
def source():
    return _env_path("ETC_TEST_SOURCE")


@pytest.fixture(scope="session")
def torch_fixtures():
    return _env_path("ETC_TEST_TORCH_FIXTURES")


@pytest.fixture(scope="session")
def decoder_fixtures():
    return _env_path("ETC_TEST_DECODER_FIXTURES")


@pytest.fixture(scope="session")
def cli():
    exe = os.environ.get("ETC_TEST_CLI") or _cli.executable()
    assert os.access(exe, os.X_OK), f"no etc CLI at {exe}"

    def run(*args, check=True):
        r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check:
            assert r.returncode == 0, f"etc {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}"
        return r

    return run


def fixture_inputs(folder):
    """The fixture's inputs (input_0.npy, ...) in order."""
    meta = json.loads((folder / "meta.json").read_text())
    return [np.load(folder / f"input_{i}.npy") for i in range(len(meta["inputs"]))]


def fixture_expected(folder):
    out = []
    i = 0
    while (folder / f"expected_{i}.npy").exists():
        out.append(np.load(folder / f"expected_{i}.npy"))
        i += 1
    return out
