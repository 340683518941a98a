"""``python -m otel_agenteval.cli``: the same as ``otel-agenteval``."""

import sys

from .main import main

sys.exit(main())
