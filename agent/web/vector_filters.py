"""Pinecone's metadata filter language, checked and evaluated the same way for every backend:
``{"field": value}``, ``{"field": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$in" |
"$nin" | "$exists": ...}}``, ``{"$and": [...]}``, ``{"$or": [...]}``; on a list field ``$eq`` and
``$in`` match when any element does."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.errors import FactweaveError

_COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")


def check_filter(flt: Any) -> dict | None:
    """The filter itself when it is well formed, else a one-line :class:`FactweaveError`."""
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise FactweaveError(f"filter must be a dict like {{'field': value}}, got {type(flt).__name__}")
    for key, condition in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list) or not condition:
                raise FactweaveError(f"filter {key} takes a non-empty list of filters")
            for part in condition:
                check_filter(part)
        elif key.startswith("$"):
            raise FactweaveError(f"unknown filter operator {key!r} at the top level (use $and or $or)")
        elif isinstance(condition, Mapping):
            for operator, operand in condition.items():
                if operator not in _COMPARISONS:
                    raise FactweaveError(
                        f"unknown filter operator {operator!r} on field {key!r}; known: {', '.join(_COMPARISONS)}"
                    )
                if operator in ("$in", "$nin") and not isinstance(operand, list):
                    raise FactweaveError(f"filter {operator} on field {key!r} takes a list")
                if operator in ("$gt", "$gte", "$lt", "$lte") and (
                        isinstance(operand, bool) or not isinstance(operand, int | float)):
                    raise FactweaveError(f"filter {operator} on field {key!r} takes a number")
                if operator == "$exists" and not isinstance(operand, bool):
                    raise FactweaveError(f"filter $exists on field {key!r} takes true or false")
        elif not isinstance(condition, str | int | float | bool):
            raise FactweaveError(f"filter value for field {key!r} must be a string, number or boolean")
    return dict(flt)


def _compare(value: Any, operator: str, operand: Any, present: bool) -> bool:
    values = value if isinstance(value, list) else [value]
    if operator == "$exists":
        return present == operand
    if operator == "$eq":
        return present and operand in values
    if operator == "$ne":
        return not present or operand not in values
    if operator == "$in":
        return present and any(item in operand for item in values)
    if operator == "$nin":
        return not present or not any(item in operand for item in values)
    if not present or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if operator == "$gt":
        return value > operand
    if operator == "$gte":
        return value >= operand
    if operator == "$lt":
        return value < operand
    return value <= operand


def matches_filter(metadata: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether a record's metadata satisfies a (checked) Pinecone-style filter."""
    if not flt:
        return True
    for key, condition in flt.items():
        if key == "$and":
            if not all(matches_filter(metadata, part) for part in condition):
                return False
        elif key == "$or":
            if not any(matches_filter(metadata, part) for part in condition):
                return False
        else:
            present = key in metadata
            value = metadata.get(key)
            conditions = condition.items() if isinstance(condition, Mapping) else [("$eq", condition)]
            if not all(_compare(value, operator, operand, present) for operator, operand in conditions):
                return False
    return True
