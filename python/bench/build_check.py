"""The one check every benchmark script makes first: figures come from a release build."""

from __future__ import annotations

import sys

import stampede


def warn_if_not_release() -> None:
    """Says on stderr when the installed package is not a release build (./scripts/test.sh
    installs a dev build; `. scripts/python-env.sh && python_env` installs the release one)."""
    if stampede.BUILD_PROFILE != "release":
        print(
            f"note: stampede is a {stampede.BUILD_PROFILE} build: figures are not comparable; "
            "rebuild it with `. scripts/python-env.sh && python_env`",
            file=sys.stderr,
        )
