"""Inductor settings that the Inductor backends expose as config fields
(docs/reference/backends.md#inductor-settings): one declaration of their names, their checks and
how they merge into the options dict Inductor gets, shared by the JIT and AOT configs."""

from __future__ import annotations

from typing import Any, ClassVar

# The settings a config may declare as fields; each field name is Inductor's own option name
# (torch._inductor.config), so a field and an `options` key mean the same thing.
SETTING_FIELDS: tuple[str, ...] = ("freezing", "max_autotune", "coordinate_descent_tuning")


class InductorSettings:
    """Marks a config with Inductor settings fields. The dataclass declares the fields itself, in
    its own field order (after AITune's fields, so positional construction keeps AITune's order);
    this base checks and merges them."""

    _setting_fields: ClassVar[tuple[str, ...]] = SETTING_FIELDS  # a config narrows this to the fields it declares

    def active_settings(self) -> dict[str, bool]:
        """The settings fields that are switched on, as Inductor options."""
        return {name: True for name in self._setting_fields if getattr(self, name, False)}

    def check_inductor_settings(self, options: Any, options_name: str) -> None:
        for name in self._setting_fields:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{type(self).__name__}.{name} must be a bool, got {value!r}")
            if isinstance(options, dict) and name in options and bool(options[name]) != value and value:
                raise ValueError(
                    f"{type(self).__name__}: {name}=True conflicts with {options_name}[{name!r}]="
                    f"{options[name]!r}; set it in one place"
                )

    def merged_inductor_options(self, options: dict[str, Any] | None) -> dict[str, Any] | None:
        """A copy of `options` with the settings fields that are on added (None when both are empty)."""
        merged = dict(options) if options is not None else {}
        merged.update(self.active_settings())
        return merged if merged or options is not None else None
