"""The ``stampede`` command, installed with the package (``[project.scripts]``): the same command
line as the ``stampede`` binary, run in this process by the extension module."""

from __future__ import annotations

import sys

from stampede import _stampede


def main() -> None:
    """Runs ``stampede`` with this process's arguments and exits with its status."""
    try:
        status = _stampede._cli(["stampede", *sys.argv[1:]])
    except KeyboardInterrupt:
        # Ctrl-C already ended the command (it handles the signal itself); Python saw it too.
        status = 0
    sys.exit(status)
