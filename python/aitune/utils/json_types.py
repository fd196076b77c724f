"""Names for JSON-shaped data: what `json.dumps` accepts and `json.loads` returns. Used in
annotations instead of `Any` for reports, checkpoints' JSON fields and `to_dict` forms."""

from __future__ import annotations

from typing import Union

JSONScalar = Union[None, bool, int, float, str]
JSON = Union[JSONScalar, list["JSON"], dict[str, "JSON"]]
JSONDict = dict[str, JSON]
