"""What every ``ainic`` subcommand shares: its errors, its help's format and the check of its output paths.

The rules (docs/contributing.md, "The command line"): a usage error is one line on stderr and exit 2, before
any work starts; a run that fails is one line and exit 1; no traceback reaches a user; an option that does not
apply is refused, never ignored; an output file's folder must exist before the run starts.
"""

import argparse
import os
from pathlib import Path


class UsageError(Exception):
    """The arguments cannot work: ``main`` prints the message and exits 2. Raised before anything runs."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default; an option whose default is None or False states its own
    (its absence means something, or it is a flag)."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def check_output(path, option: str) -> None:
    """``path`` can be written: its folder exists and is writable, and it is not a folder itself."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a folder, not a file")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def check_outputs(args) -> None:
    """Every output path of the command (its parser's ``outputs`` default: the dests that name a file)."""
    for dest in getattr(args, "outputs", ()):
        value = getattr(args, dest, None)
        if value:
            check_output(value, "--" + dest.replace("_", "-"))
