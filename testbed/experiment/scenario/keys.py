"""The keys of a scenario's models, for error messages (the keys a section takes) and for
``zcube run --help`` (every key with its default, limit and meaning)."""
from __future__ import annotations

from typing import Optional, get_args, get_origin

from testbed.experiment.scenario.limits import shown as _limit


def section_of(annotation, base) -> Optional[type]:
    """The section model (a ``base``, or one of a tuple of them) inside ``Optional[...]``,
    ``list[...]`` or ``Annotated[...]``."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    for arg in get_args(annotation):
        found = section_of(arg, base)
        if found is not None:
            return found
    return None


def known(root: type, base, loc: tuple) -> list[str]:
    """The keys of the section at ``loc`` (an error's location) under ``root``."""
    cls: Optional[type] = root
    for part in loc:
        if isinstance(part, str):
            field = cls.model_fields.get(part) if cls else None
            cls = section_of(field.annotation, base) if field else None
    return list(cls.model_fields) if cls else []


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return '""' if value == "" else str(value)


def _describe(cls: type, base, prefix: str, lines: list) -> None:
    for key, field in cls.model_fields.items():
        sub = section_of(field.annotation, base)
        if sub is not None:
            listed = get_origin(field.annotation) is list
            limit = _limit(field)
            lines.append(f"  {prefix}{key}:{' (list)' if listed else ''}  {field.description}"
                         + (f" ({limit})" if limit else ""))
            _describe(sub, base, prefix + ("  - " if listed else "  "), lines)
            continue
        if field.is_required():
            default = "required"
        else:
            value = field.default_factory() if field.default_factory else field.default
            default = "" if value is None else f"default {_shown(value)}"
        default = ", ".join(x for x in (default, _limit(field)) if x)
        lines.append(f"  {prefix}{key}  {field.description}" + (f" ({default})" if default
                                                                 else ""))


def describe(root: type, base) -> str:
    lines: list = []
    _describe(root, base, "", lines)
    return "\n".join(lines)
