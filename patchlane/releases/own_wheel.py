"""patchlane's own wheel for a wheelhouse: built from the checkout when patchlane runs from one,
else packed again from the installed package, so ``patchlane wheelhouse`` runs from a plain
``pip install`` with no checkout.

Packing again is safe only for the bytes the wheel installed: every file is first checked
against the installed ``RECORD`` (:func:`patchlane.sweep.record.verify_distribution`), and an
edited, missing or unreadable file refuses the whole wheel, naming it. What pip added at install
time is left out (``INSTALLER``, ``REQUESTED``, ``direct_url.json``, byte-code caches), the
command script goes back to ``.data/scripts`` with the ``#!python`` line an installer rewrites,
and ``RECORD`` is written afresh. The wheel format is a zip with a CSV ``RECORD`` (PEP 427);
the standard library writes it, where the ``wheel`` project's ``WheelFile`` would be a runtime
dependency of every training job for this one command.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import zipfile
from importlib import metadata
from pathlib import Path

from ..common.errors import UsageError

__all__ = ["OwnWheelError", "pack_installed"]

_ADDED_AT_INSTALL = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
_SCRIPTS = ("patchlane",)
"""The scripts the wheel carries in ``.data/scripts`` (see ``hatch_build.py``)."""


class OwnWheelError(UsageError):
    """The installed package cannot be packed again as the wheel it came from."""


def _hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _members(dist: metadata.Distribution, root: Path, info: str) -> dict[str, bytes]:
    """Wheel path -> bytes, from the installed files the RECORD lists."""
    text = dist.read_text("RECORD") or ""
    members: dict[str, bytes] = {}
    data = info.replace(".dist-info", ".data")
    for row in csv.reader(text.splitlines()):
        if not row or not row[0] or row[0].endswith(".pyc") or "__pycache__" in row[0]:
            continue
        item = row[0]
        parts = Path(item).parts
        if parts[0] == info and parts[-1] in _ADDED_AT_INSTALL and len(parts) == 2:
            continue
        if parts[0] in ("patchlane", info):
            members[item] = (root / item).read_bytes()
        elif parts[-1] in _SCRIPTS and parts[-2:-1] == ("bin",):
            body = _script(root, item, row[1] if len(row) > 1 else "")
            # an installer rewrote `#!python` to its interpreter: the wheel carries the marker
            members[f"{data}/scripts/{parts[-1]}"] = b"#!python\n" + body.split(b"\n", 1)[1]
    return members


def _script(root: Path, item: str, recorded: str) -> bytes:
    """The installed command script a RECORD row names, checked against its hash. pip records
    it relative to where it installed (``../../../bin/patchlane`` in a virtual environment);
    ``pip install --target`` moves the tree after writing RECORD, so it is also looked for in
    the target's own ``bin``."""
    for path in (root / item, root / "bin" / Path(item).name):
        body = path.read_bytes() if path.is_file() else None
        if body is not None and _hash(body) == recorded:
            return body
    raise OwnWheelError(f"{root}: the `{Path(item).name}` command patchlane's RECORD lists "
                        f"({item}) is not there as installed (missing or edited); fix: "
                        "reinstall patchlane (`pip install --force-reinstall --no-deps "
                        "patchlane`)")


def pack_installed(out: Path) -> Path:
    """Write the wheel of the installed patchlane into ``out``; its path."""
    from ..sweep.record import verify_distribution

    try:
        dist = metadata.distribution("patchlane")
    except metadata.PackageNotFoundError:
        raise OwnWheelError("patchlane is importable but not installed as a distribution (no "
                            "patchlane-*.dist-info on sys.path), so its wheel cannot be packed "
                            "again; fix: pip install the patchlane wheel, or run this from a "
                            "checkout") from None
    import patchlane

    root = Path(str(dist.locate_file(""))).resolve()
    running = Path(patchlane.__file__).resolve().parent
    if running != root / "patchlane":
        raise OwnWheelError(f"the patchlane running ({running}) is not the installed "
                            f"distribution's ({root / 'patchlane'}); fix: run the installed "
                            "`patchlane` command, or run this from the checkout it comes from")
    check = verify_distribution("patchlane")
    changed = [*check.modified, *check.missing]
    if check.error or changed or check.unreadable:
        what = check.error or (f"{len(changed)} installed file(s) differ from its RECORD, "
                               f"e.g. {changed[0]}" if changed else check.unreadable[0])
        raise OwnWheelError(f"{root}: patchlane {dist.version} is not what its wheel installed "
                            f"({what}); a wheel packed from it would carry that edit to every "
                            "box; fix: reinstall it (`pip install --force-reinstall --no-deps "
                            f"patchlane=={dist.version}`)")
    info = f"patchlane-{dist.version}.dist-info"
    members = _members(dist, root, info)
    if f"{info}/WHEEL" not in members:
        raise OwnWheelError(f"{root / info}: no WHEEL file in its RECORD; fix: reinstall "
                            "patchlane from its wheel")
    tags = [line.split(":", 1)[1].strip() for line in members[f"{info}/WHEEL"].decode()
            .splitlines() if line.startswith("Tag:")] or ["py3-none-any"]
    path = out / f"patchlane-{dist.version}-{tags[0]}.whl"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, body in sorted(members.items()):
        writer.writerow([name, _hash(body), len(body)])
    writer.writerow([f"{info}/RECORD", "", ""])
    out.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, body in sorted(members.items()):
            info_row = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info_row.external_attr = (0o755 if "/scripts/" in name else 0o644) << 16
            wheel.writestr(info_row, body, zipfile.ZIP_DEFLATED)
        wheel.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                       record.getvalue())
    os.replace(partial, path)
    return path
