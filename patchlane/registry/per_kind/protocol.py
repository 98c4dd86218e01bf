"""What every entry kind's module provides (:class:`KindParts`), and what ``patchlane new``
offers a kind's writer (:class:`Drafting`).

A kind's module is the one place its parts live: the keys it reads from the registry
(``parse``), the ledger decision at its import (``decide``) or on demand (``judge``), the options
``patchlane new`` takes for it (``OPTIONS``) and the block it writes (``write``). What every kind
has as plain facts (its keys' names, how the startup decides it, whether the sweep applies an
overlay) is its row in :data:`patchlane.registry.kinds.KINDS`. A part a kind has no use for is
still defined and says so (returns None), so the table's test can hold every kind to every part.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from ..fields import Fields
    from ..records import Entry, KindSpec, LedgerResult, Target

__all__ = ["Drafting", "KindParts", "NewOption", "Release"]


class NewOption(NamedTuple):
    """One option ``patchlane new`` takes for a kind, beyond the options every kind shares."""

    name: str
    """The request's key (``requires``): what :meth:`Drafting.option` returns it under."""
    flag: str
    metavar: str
    help: str
    repeatable: bool = False


class Release(NamedTuple):
    """The installed release an entry is written from."""

    distribution: str
    version: str
    source: str
    """``metadata`` or ``source tree (<file>)``."""


class Drafting(Protocol):
    """What ``patchlane new`` lends a kind's :func:`write`: the request, the block and files
    being drafted, and its checks of the environment (each refusal names the option, what it
    found and the fix)."""

    @property
    def entry_id(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def target(self) -> str | None:
        """``--target`` as given."""

    @property
    def policy(self) -> str | None: ...

    @property
    def version_from(self) -> str | None:
        """``--version-from MODULE:ATTR``: where the gate reads the version of code that is no
        installed distribution (a source tree, ``PYTHONPATH``), as ``target.version_from``."""

    lines: list[str]
    """The entry's block, relative indentation, without newlines."""
    files: dict[str, str]
    """Path relative to the registry's folder -> text."""
    notes: list[str]
    settings: dict[str, bool | int | float | str]
    applies_to: str | None

    def option(self, name: str) -> Any:
        """A kind option's value (one of the kind's ``OPTIONS``), None when not given."""

    def refuse(self, problem: str, *, found: object = None, expected: str | None = None,
               fix: str | None = None) -> Exception: ...

    def find(self, module_name: str, flag: str) -> None:
        """Refuse a module this interpreter cannot find; import nothing."""

    def imported(self, module_name: str, flag: str) -> ModuleType | None:
        """The module imported as a training job would (None: strict mode refused it)."""

    def resolve_target(self, module: ModuleType | None, module_name: str,
                       qualname: str) -> str | None:
        """The target's shape (``patchlane.targets``); None when the module could not be
        imported here. Refused, with the fix, when no shape can carry it."""

    def fingerprint(self, module: ModuleType | None, module_name: str, qualname: str) -> str:
        ...

    def distribution(self, module_name: str | None) -> str:
        """``--distribution``, else the installed one that provides the module."""

    def release(self, distribution: str, module: ModuleType | None,
                metadata_only: bool = False) -> Release:
        """The installed release the entry is written from (refused when there is none)."""

    def gate(self, release: Release) -> tuple[str, str]:
        """``applies_to`` (``--applies-to``, else the installed release up to its next minor)
        and the comment that says where it came from."""

    def gated(self, module_name: str | None, module: ModuleType | None) -> None:
        """Write ``target`` and ``applies_to`` when a distribution is named or found."""

    def specifier(self, flag: str, text: str) -> SpecifierSet: ...

    def setting(self, item: str) -> tuple[str, bool | int | float | str]:
        """``NAME=VALUE`` read as the registry will read it."""

    def scalar(self, text: str) -> str:
        """Text as a YAML scalar."""

    def value(self, value: bool | int | float | str) -> str:
        """A setting's value as YAML."""

    def comment(self, text: str) -> list[str]: ...

    def upstream_lines(self) -> list[str]: ...

    def retire_lines(self, probe: list[str] | None = None) -> list[str]:
        """``retire_when``: ``--retire-release``, then ``probe`` when the kind's retirement
        reads one, else the linked fix in a release."""

    def stub(self, what: str, **values: Any) -> str:
        """A starting file: ``overlay``, ``reproducer`` or ``check`` (``function=``)."""


class KindParts(Protocol):
    """One entry kind's module, as the table (:data:`patchlane.registry.per_kind.PARTS`) holds
    it."""

    OPTIONS: tuple[NewOption, ...]

    def parse(self, fields: Fields, data: Mapping[str, Any], target: Target) -> KindSpec | None:
        """Its own keys read into its record (None for a kind with none)."""

    def decide(self, entry: Entry) -> LedgerResult | None:
        """The check of the installed environment when its module is imported (a floor, a
        pin); None for a kind not decided that way."""

    def judge(self, entry: Entry, config: Any) -> LedgerResult | None:
        """The check of a run's configuration (``patchlane.check_config``); None for a kind
        that judges none."""

    def write(self, draft: Drafting) -> None:
        """Its part of the block ``patchlane new`` appends, and its starting files."""
