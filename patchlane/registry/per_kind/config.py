"""``kind: config``: module attributes assigned as soon as their module is imported (the
decider's hook in :mod:`patchlane.deciding.decider`), each recorded in the audit with the value it
replaced."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..fields import MODULE_RE, expect_type
from .protocol import NewOption

if TYPE_CHECKING:
    from ..fields import Fields
    from ..records import Entry, LedgerResult, Target
    from .protocol import Drafting

__all__ = ["OPTIONS", "ConfigSettings", "decide", "judge", "parse", "write"]


class ConfigSettings(NamedTuple):
    """Module attributes assigned when their module is imported."""

    settings: Mapping[str, bool | int | float | str]


OPTIONS: tuple[NewOption, ...] = (
    NewOption("settings", "--setting", "NAME=VALUE", "config (repeatable): e.g. "
              "torch._dynamo.config.recompile_limit=64", repeatable=True),)


def parse(fields: Fields, data: Mapping[str, Any], target: Target) -> ConfigSettings:
    settings = expect_type(fields, data["settings"], dict, "settings",
                           "a mapping of 'package.module.attribute' to value")
    if not settings:
        raise fields.fail("no settings", key="settings", found=settings,
                          expected="at least one 'package.module.attribute: value'")
    for name, value in settings.items():
        module = str(name).rpartition(".")[0]
        if not module or not MODULE_RE.match(str(name)):
            raise fields.fail("invalid setting name", key=f"settings.{name}", found=name,
                              expected="'package.module.attribute' (e.g. "
                              "'torch._dynamo.config.recompile_limit')")
        if not isinstance(value, (bool, int, float, str)) or value is None:
            raise fields.fail("invalid setting value", key=f"settings.{name}", found=value,
                              expected="a bool, number or string")
    return ConfigSettings(dict(settings))


def decide(entry: Entry) -> LedgerResult | None:
    return None  # assigned, not checked: the decider records each value it replaced


def judge(entry: Entry, config: Any) -> LedgerResult | None:
    return None


def write(draft: Drafting) -> None:
    for item in draft.option("settings") or ():
        name, value = draft.setting(item)
        module_name, _, attribute = name.rpartition(".")
        module = draft.imported(module_name, "--setting")
        if module is not None and not hasattr(module, attribute):
            close = difflib.get_close_matches(attribute, dir(module), n=3)
            raise draft.refuse(f"{module_name} has no attribute {attribute!r}",
                               found=f"--setting {item}", expected="an attribute the module "
                               "defines" + (f" (close: {', '.join(close)})" if close else ""),
                               fix="correct the name: a misspelt setting would be assigned "
                               "and never read")
        draft.settings[name] = value
    first = next(iter(draft.settings)).rpartition(".")[0]
    draft.gated(first, None)
    draft.lines.append("settings:")
    draft.lines += [f"  {name}: {draft.value(value)}" for name, value in draft.settings.items()]
    draft.lines += [*draft.upstream_lines(),
                    *draft.retire_lines(["  probe: true  # upstream's own default reaches "
                                         "the value"])]
