"""Serving tuned models as NVIDIA Dynamo workers (docs/serving.md). Needs the optional
dependency `pip install 'aitune[dynamo]'` only when a worker starts."""

from aitune.dynamo.config import DynamoWorkerConfig
from aitune.dynamo.requests import BadRequest
from aitune.dynamo.worker import DynamoWorker, dynamo_worker

__all__ = ["BadRequest", "DynamoWorker", "DynamoWorkerConfig", "dynamo_worker"]
