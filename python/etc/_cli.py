"""The ``etc`` console script: runs the etc CLI that ships in the package (etc/_bin/etc)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def executable() -> str:
    """The path of the etc CLI binary inside the installed package."""
    return str(Path(__file__).resolve().parent / "_bin" / "etc")


def main() -> None:
    exe = executable()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"etc: the CLI binary is missing from the package ({exe}); reinstall etc\n")
        sys.exit(70)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
