"""`python -m aitune.dynamo worker|serve` (launch.py, docs/serving.md)."""

import sys

from aitune.dynamo.launch import main

sys.exit(main())
