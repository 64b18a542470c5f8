"""The base of every configuration model: frozen, no unknown fields, no booleans for numbers,
and input values never repeated in validation errors (they may be secrets)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class StrictModel(BaseModel):
    """A frozen pydantic model that refuses unknown fields and ``True`` for ``1``."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """``True`` is not a number of seconds (pydantic would read it as 1)."""
        field = info.field_name
        if isinstance(value, bool) and field and cls.model_fields[field].annotation is not bool:
            raise ValueError(f"must not be a boolean, got {value!r}")
        return value
