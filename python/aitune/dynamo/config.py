"""DynamoWorkerConfig: what a worker serves and where it registers (docs/serving.md)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Union

from aitune.exceptions import InvalidValueError

WORKER_TYPES = ("embedding", "image", "video")
# The engine link's shared secret (engine_link.py): set by `serve --fronts` for its children.
ENGINE_AUTHKEY_ENV = "AITUNE_ENGINE_AUTHKEY"

# How a request becomes the served function's input: a callable (request dict -> input), or a
# mapping {parameter name: request field}, where a field may be dotted ("nvext.seed").
RequestMapping = Union[Callable[[dict], Any], Mapping[str, str], None]


@dataclasses.dataclass
class DynamoWorkerConfig:
    """The high-level worker's settings.

    type: the OpenAI surface served: "embedding" (/v1/embeddings), "image"
        (/v1/images/generations) or "video" (/v1/videos).
    model_path: what the worker registers the model under; also its name unless `model_name`
        is given (e.g. the .ait checkpoint it serves).
    mapping: how a request becomes the function's input (None: the modality's main field,
        `input` for embeddings and `prompt` for images and videos); see docs/serving.md.
    namespace, component, endpoint: the Dynamo endpoint `namespace.component.endpoint`.
    enable_nats: publish events over NATS instead of Dynamo's default ZMQ event plane.
    model_name: the name clients send in `model`.
    max_wait_ms: the longest the batcher waits, with the model free, for more requests to fill
        a batch, counted from the oldest queued item's arrival; it waits only when more are
        expected (never at a steady single client). 0 turns batching off: one item per model
        call (tuned modules with a batch axis only; docs/serving.md, "Batching").
    token_id_limit: token ids of a tuned module's integer input must lie in [0, token_id_limit);
        an id outside is refused with a 400 before it reaches the model (on CUDA an id beyond
        the embedding table trips a device-side assert that breaks the process's CUDA context).
        None: the limit comes from the module where it can be known (its
        `get_input_embeddings()`, else its one nn.Embedding); 0: no check (docs/serving.md,
        "Errors").
    """

    type: str
    model_path: str
    mapping: RequestMapping = None
    namespace: str = "aitune"
    component: str = "backend"
    endpoint: str = "generate"
    enable_nats: bool = False
    model_name: str | None = None
    max_wait_ms: float = 2.0
    token_id_limit: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every field's check (InvalidValueError, a ValueError, naming the field). dynamo_worker
        runs it again before the Dynamo runtime starts: the fields may have changed since."""
        if self.type not in WORKER_TYPES:
            raise InvalidValueError(
                f"DynamoWorkerConfig.type must be one of {', '.join(WORKER_TYPES)}; got {self.type!r}"
            )
        if not isinstance(self.model_path, str) or not self.model_path:
            raise InvalidValueError(
                f"DynamoWorkerConfig.model_path must be a non-empty string; got {self.model_path!r}"
            )
        for field in ("namespace", "component", "endpoint"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value or "." in value:
                raise InvalidValueError(
                    f"DynamoWorkerConfig.{field} must be a non-empty name without dots "
                    f"(the endpoint path is namespace.component.endpoint); got {value!r}"
                )
        if self.mapping is not None and not callable(self.mapping) and not isinstance(self.mapping, Mapping):
            raise InvalidValueError(
                "DynamoWorkerConfig.mapping must be None, a callable (request -> input) or a mapping "
                f"{{parameter: request field}}; got a {type(self.mapping).__name__}"
            )
        if (
            isinstance(self.max_wait_ms, bool)
            or not isinstance(self.max_wait_ms, (int, float))
            or not 0 <= self.max_wait_ms <= 1000
        ):
            raise InvalidValueError(
                f"DynamoWorkerConfig.max_wait_ms must be a number of milliseconds in [0, 1000]; got {self.max_wait_ms!r}"
            )

        if self.token_id_limit is not None and (
            isinstance(self.token_id_limit, bool) or not isinstance(self.token_id_limit, int) or self.token_id_limit < 0
        ):
            raise InvalidValueError(
                "DynamoWorkerConfig.token_id_limit must be None (from the model), 0 (no check) or the vocabulary "
                f"size, an integer >= 1; got {self.token_id_limit!r}"
            )

    @property
    def endpoint_path(self) -> str:
        return f"{self.namespace}.{self.component}.{self.endpoint}"

    @property
    def served_name(self) -> str:
        return self.model_name or self.model_path
