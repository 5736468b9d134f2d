"""What the derivations share: the command line (``[SHARED_DATA_DIR] [--out FILE]``), the
check that the reference data is there, and the write of the shipped file. A sibling of
the scripts, imported as ``from derive_common import ...`` (a script's own folder is on
its path)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


def reference_folder(doc: str, default_out: Path, folder: str) -> tuple[Path, Path]:
    """The reference data's ``folder`` (under the positional SHARED_DATA_DIR, default
    ``../shared/data``) and the file to write (``--out``); one line and exit code 2 when
    the folder is missing."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("shared", nargs="?", default=str(SHARED))
    ap.add_argument("--out", default=str(default_out))
    args = ap.parse_args()
    where = Path(args.shared) / folder
    if not where.is_dir():
        print(f"error: {where} not found", file=sys.stderr)
        raise SystemExit(2)
    return where, Path(args.out)


def write_json(path: Path, doc: dict[str, Any], what: str = "") -> None:
    """Write the shipped file (indented, one trailing newline) and say so."""
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}{f' ({what})' if what else ''}")
