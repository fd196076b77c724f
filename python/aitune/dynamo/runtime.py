"""The optional NVIDIA Dynamo dependency (`pip install aitune[dynamo]`), imported only when a
worker starts, so `import aitune.dynamo` works without it."""

from __future__ import annotations

import types

INSTALL_HINT = (
    "aitune's Dynamo workers need NVIDIA Dynamo: pip install 'aitune[dynamo]' (the packages ai-dynamo and "
    "ai-dynamo-runtime)"
)


def import_dynamo() -> types.SimpleNamespace:
    """The Dynamo names a worker uses; ImportError naming the packages when they are missing."""
    try:
        from dynamo.llm import ModelInput, ModelType, WorkerType, register_model
        from dynamo.llm.exceptions import InvalidArgument
        from dynamo.runtime import DistributedRuntime
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({type(e).__name__}: {e})") from e
    return types.SimpleNamespace(
        ModelInput=ModelInput,
        ModelType=ModelType,
        WorkerType=WorkerType,
        register_model=register_model,
        InvalidArgument=InvalidArgument,
        DistributedRuntime=DistributedRuntime,
    )


def model_type(dynamo: types.SimpleNamespace, worker_type: str) -> object:
    return {
        "embedding": dynamo.ModelType.Embedding,
        "image": dynamo.ModelType.Images,
        "video": dynamo.ModelType.Videos,
    }[worker_type]
