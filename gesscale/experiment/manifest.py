"""What a bundle owns: `manifest.json` lists every file a run wrote, with its SHA-256, and the copies of its inputs.

A bundle holds only itself. `experiment run` (or `replay`) into a folder that is not empty refuses; with
`--force` it first removes exactly the files the previous bundle's manifest lists (and an interrupted live run's
`progress.json` lists), never anything else, and still refuses when other files remain. Every path a bundle writes
or reads is resolved and checked to lie inside its folder (`inside`), so a name with `../` or a symbolic link
cannot lead a write or a read elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gesscale.errors import UserError

MANIFEST = "manifest.json"
PROGRESS = "progress.json"  # an interrupted live experiment's plan and completed runs (gesscale.experiment.live)
FORMAT = 2  # bundles before this had no manifest and no copies of their inputs


def inside(root: Path, *parts: str) -> Path:
    """`root/parts...`, refused (UserError) when it resolves outside `root` (a `..`, an absolute part, a link)."""
    base = root.resolve()
    path = base.joinpath(*parts)
    resolved = path.resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise UserError(f"{'/'.join(parts)!r} leads outside the bundle {root}")
    return path


def named(root: Path, folder: str, name: str) -> Path:
    """`root/folder/name` for a file name made from a name (a policy id, a run): `name` must be one path component
    (no `/`, not `.` or `..`, no control character), so the file stays in its folder."""
    if not name or "/" in name or "\\" in name or name in (".", "..") or any(ord(c) < 32 for c in name):
        raise UserError(f"{name!r} is not a file name: a bundle's {folder}/ files are named after it")
    return inside(root, folder, name)


def relative(root: Path, path: Path) -> str:
    """`path` as a bundle-relative name (POSIX), checked to be inside `root`."""
    base = root.resolve()
    resolved = path.resolve()
    if not resolved.is_relative_to(base):
        raise UserError(f"{path} is outside the bundle {root}")
    return resolved.relative_to(base).as_posix()


def write_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file and a rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_json(path: Path) -> Any:
    """A JSON file of a bundle; any problem is one UserError line."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path.parent}: no {path.name}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"cannot read {path}: {err}") from None


def owned_files(out: Path) -> list[str]:
    """The bundle-relative files a previous bundle in `out` owns: those its manifest lists (and the manifest), and
    those an interrupted live run's progress file lists (and that file)."""
    names: list[str] = []
    for doc_name in (MANIFEST, PROGRESS):
        path = out / doc_name
        if not path.is_file():
            continue
        doc = read_json(path)
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(files, dict):
            raise UserError(f"{path}: no file list; --force clears only what a bundle's manifest lists")
        names += [str(f) for f in files] + [doc_name]
        running = doc.get("running")
        if isinstance(running, str):  # the run cut short: everything under its folder is the bundle's own
            folder = inside(out, running)
            names += [p.relative_to(out.resolve()).as_posix() for p in folder.resolve().rglob("*") if p.is_file()]
    return list(dict.fromkeys(names))


def _foreign(out: Path, owned: Iterable[str]) -> list[str]:
    """Files under `out` that `owned` does not name, leaving out nested bundles (folders with their own manifest,
    such as the default `replay/`)."""
    owned = set(owned)
    nested = [p.parent for p in out.rglob(MANIFEST) if p.parent != out]
    out_files = []
    for p in sorted(out.rglob("*")):
        if p.is_dir() and not p.is_symlink():
            continue
        if any(p.is_relative_to(n) for n in nested):
            continue
        rel = p.relative_to(out).as_posix()
        if rel not in owned:
            out_files.append(rel)
    return out_files


def prepare_out(out: Path, force: bool, resume: bool = False) -> None:
    """Make `out` ready for a new bundle: created when missing; refused when it holds anything, unless `force`
    (remove what the previous bundle owns; refuse if anything else remains) or `resume` (an interrupted live run
    continues: its progress file must be there)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder")
    if resume:
        if not (out / PROGRESS).is_file():
            raise UserError(f"--resume: {out} holds no interrupted live experiment (no {PROGRESS})")
        return
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise UserError(f"--out {out} is not empty: choose a new folder, or --force to replace the bundle in it "
                            "(only the files its manifest lists are removed)")
        owned = owned_files(out)
        foreign = _foreign(out, owned)
        if foreign:
            raise UserError(f"--force: {out} holds {len(foreign)} file(s) no bundle manifest lists (e.g. "
                            f"{foreign[0]!r}); --force removes only a bundle's own files: move them or choose "
                            "another --out")
        _remove(out, owned)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {out}: {err.strerror}") from None


def _remove(out: Path, names: Iterable[str]) -> None:
    """Remove the named files (each checked to be inside `out`), then the folders that became empty."""
    parents: set[Path] = set()
    for name in names:
        path = inside(out, name) if not Path(name).is_absolute() else None
        if path is None:
            raise UserError(f"{out}: the manifest names {name!r}, which is not inside the bundle")
        if path.is_file() or path.is_symlink():
            path.unlink()
            parents.update(q for q in path.parents if q.is_relative_to(out.resolve()) and q != out.resolve())
    for folder in sorted(parents, key=lambda q: len(q.parts), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    from gesscale.experiment.provenance import sha256_of_file

    return sha256_of_file(path)


def write_manifest(out: Path, paths: Iterable[Path], inputs: Mapping[str, Any], kind: str) -> Path:
    """Write `out/manifest.json`: every file the run wrote (bundle-relative, sorted, once each) with its SHA-256,
    and the inputs carried under `inputs/` (role -> file, SHA-256, where it was copied from)."""
    files = {relative(out, p): None for p in paths}
    files.pop(MANIFEST, None)
    doc = {"format": FORMAT, "kind": kind,
           "files": {name: sha256(out / name) for name in sorted(files)},
           "inputs": dict(inputs)}
    return write_atomic(out / MANIFEST, json.dumps(doc, indent=2) + "\n")
