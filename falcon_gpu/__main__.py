"""Allow ``python -m falcon_gpu``."""

from falcon_gpu.cli import main

raise SystemExit(main())
