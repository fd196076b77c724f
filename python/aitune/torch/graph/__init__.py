"""The graph data model (docs/design.md#layers): what a recorded call is (graph specs, paths, samples)
and the recorder that builds it. It imports nothing above the base layer."""
