"""A callable served as an image or video worker for the Dynamo end-to-end test:
`python dynamo_media_worker.py image|video`. It "renders" the prompt as bytes, so the test can
check what came back; the prompt "fail" makes it raise."""

from __future__ import annotations

import sys

from aitune.dynamo import DynamoWorkerConfig, dynamo_worker


def main(kind: str) -> None:
    def render(prompt: str) -> bytes:
        if prompt == "fail":
            raise RuntimeError("the renderer failed")
        return f"{kind}:{prompt}".encode()

    dynamo_worker(render, DynamoWorkerConfig(type=kind, model_path=f"{kind}-model", component=f"{kind}s"))


if __name__ == "__main__":
    main(sys.argv[1])
