"""The registry: ``registry.yaml`` files parsed and validated into frozen :class:`Entry` records.

Loading is all-or-nothing: every file is parsed and every entry validated before anything is
returned, so a malformed registry can never leave a process half-patched. One module per
concern:

- :mod:`.kinds`: what each entry kind is, one row of facts per kind (its keys, how the startup
  decides it, whether it carries an overlay);
- :mod:`.records`: the frozen records (:class:`Entry` and its value records, :class:`LedgerResult`,
  :class:`StartupRow`, :class:`Registry`), all that code reading entries needs;
- :mod:`.fields`: the readers of one value (a range, a file, a ``when:``), every refusal naming
  the file, entry and key;
- :mod:`.per_kind`: one module per kind (its own keys and record, its ledger decision, what
  ``patchlane new`` writes for it), registered in one table;
- :mod:`.schema`: the validation that builds entries, the only place entries are built;
- :mod:`.reader`: a registry file's bytes and text (regular files of bounded size, UTF-8);
- :mod:`.safe_yaml`: the text parsed with a safe loader (duplicate keys, alias bombs refused);
- :mod:`.loader`: :func:`parse_registry` and :func:`load_registries`, the three put together.

The validated-registry cache (:mod:`patchlane.registry.cache`) keys on every module here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..installed.gates import KNOWN_IMPORT_NAMES, import_name
from .kinds import KINDS, DecidedBy, Kind, KindRules
from .reader import MAX_REGISTRY_BYTES, read_registry_bytes
from .records import (
    Entry,
    FingerprintPolicy,
    FingerprintSpec,
    KindSpec,
    LedgerResult,
    Policy,
    Registry,
    RetireWhen,
    StartupRow,
    Status,
    Target,
    Upstream,
    When,
)

if TYPE_CHECKING:
    from .loader import load_registries, parse_registry
    from .per_kind import CompatGate, ConfigSettings, PackagingPin, VersionFloor
    from .schema import SCHEMA_VERSION

__all__ = [
    "KINDS",
    "KNOWN_IMPORT_NAMES",
    "MAX_REGISTRY_BYTES",
    "SCHEMA_VERSION",
    "CompatGate",
    "ConfigSettings",
    "DecidedBy",
    "Entry",
    "FingerprintPolicy",
    "FingerprintSpec",
    "Kind",
    "KindRules",
    "KindSpec",
    "LedgerResult",
    "PackagingPin",
    "Policy",
    "Registry",
    "RetireWhen",
    "StartupRow",
    "Status",
    "Target",
    "Upstream",
    "VersionFloor",
    "When",
    "import_name",
    "load_registries",
    "parse_registry",
    "read_registry_bytes",
]

_ON_FIRST_USE = {
    "load_registries": "loader",
    "parse_registry": "loader",
    "SCHEMA_VERSION": "schema",
    # each kind's own record, in its module: loaded with the table of kinds' parts
    "CompatGate": "per_kind",
    "ConfigSettings": "per_kind",
    "PackagingPin": "per_kind",
    "VersionFloor": "per_kind",
}
"""Names whose modules are imported when first asked for: a start the validated-registry cache
serves reads only records and bytes, so `import patchlane` then loads neither PyYAML nor the
schema (a few ms; the cache exists to save them)."""


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})
