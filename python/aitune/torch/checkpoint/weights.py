"""Module weights as safetensors, tied weights stored once (docs/reference/checkpoint.md#layout-and-manifest)."""

from __future__ import annotations

from typing import Any

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors


def pack_state_dict(state: dict[str, Any]) -> tuple[bytes, dict[str, str], dict[str, Any]]:
    """(safetensors bytes, aliases {name: stored name}, extra state) — tensors sharing storage,
    offset and shape are stored once. Non-tensor entries (extra_state) must be JSON-representable."""
    stored: dict[str, torch.Tensor] = {}
    seen: dict[tuple, str] = {}
    aliases: dict[str, str] = {}
    extra: dict[str, Any] = {}
    bad = []
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            if value is None or isinstance(value, (bool, int, float, str, list, dict)):
                extra[name] = value
            else:
                bad.append(name)
            continue
        if value.device.type == "meta":
            raise ValueError(
                f"weight '{name}' is on the meta device: the module's weights were released after "
                "tuning (config.device_after_tuning='meta'), so they cannot be saved; set "
                "aitune.torch.config.device_after_tuning='cpu' before tuning to keep them"
            )
        identity = (
            (
                value.untyped_storage().data_ptr(),
                value.storage_offset(),
                tuple(value.shape),
                tuple(value.stride()),
                value.dtype,
            )
            if value.numel()
            else None
        )
        if identity is not None and identity in seen:
            aliases[name] = seen[identity]
            continue
        if identity is not None:
            seen[identity] = name
        stored[name] = value.detach().to("cpu").contiguous()
    if bad:
        raise ValueError(f"non-tensor state entries are not JSON-representable and cannot be saved: {bad}")
    return save_safetensors(stored), aliases, extra


def unpack_state_dict(data: bytes, aliases: dict[str, str], extra: dict[str, Any]) -> dict[str, Any]:
    tensors = load_safetensors(data)
    state: dict[str, Any] = dict(tensors)
    for name, target in aliases.items():
        state[name] = tensors[target]
    state.update(extra)
    return state
