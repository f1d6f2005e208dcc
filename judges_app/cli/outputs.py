"""Where a command's outputs go by default: names made into one safe path part, folders kept inside the runs
folder.

    default_output("runs", "agreement", "labels", "faithfulness")   # runs/agreement/labels-faithfulness

Owns: turning names (a data file's stem, a judge's name) into paths. Must not make folders (``common.output_folder``
does, refusing links and files).
"""

from __future__ import annotations

import re
from pathlib import Path

from judges_app.cli.common import UsageError


def path_part(name: str) -> str:
    """``name`` (a data file's stem, a judge's name) as one safe file-name part: runs of anything but letters,
    digits, ``_``, ``.`` and ``-`` become ``_``; no leading or trailing ``.`` or ``_``; at most 100 characters;
    ``unnamed`` when nothing is left. The one place a name becomes part of a path."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("._")[:100].strip("._")
    return slug or "unnamed"


def default_output(runs_dir: str | Path, command: str, *names: str) -> Path:
    """The default output folder ``<runs_dir>/<command>/<name>-<name>...`` (each name through ``path_part``),
    checked to stay inside ``<runs_dir>/<command>``."""
    root = Path(runs_dir) / command
    folder = root / "-".join(path_part(name) for name in names)
    if not folder.resolve().is_relative_to(root.resolve()) or folder.resolve() == root.resolve():
        raise UsageError(f"the default output folder for {names!r} would leave {root}; give --out")
    return folder
