#!/usr/bin/env python3
"""Open-Falcon falcon-agent plugin: one cycle of GPU and pod metrics as one JSON array.

Install with ``falcon-gpu install-plugin DIR [--config FILE]`` rather than copying
this file: falcon-agent runs plugins with a bare environment, so the ``python3``
below is the system one, which has falcon_gpu only where it was installed
system-wide; ``install-plugin`` writes the same thing with this installation's
interpreter. The ``60_`` prefix makes falcon-agent run it every 60 seconds. It prints exactly one JSON
array on stdout, logs only to stderr, and exits 0 even when GPUs fail (falcon-agent
throws away everything a plugin prints when it exits non-zero). Settings come
from the usual places (``/etc/falcon-gpu/falcon-gpu.toml``, ``FALCON_GPU_*``).
"""

import gc
import sys

if __name__ == "__main__":
    # A process that lives one cycle: the cyclic collector would only walk the objects the imports
    # build, again and again, to free nothing that exiting does not (about 5% of the run's instructions).
    gc.disable()
    try:
        from falcon_gpu.cli import main
    except ImportError as exc:  # not installed: still one valid JSON array
        sys.stderr.write(f"60_gpu_monitor: falcon_gpu is not installed ({exc}); pip install falcon-gpu\n")
        sys.stdout.write("[]\n")
        sys.exit(0)
    sys.exit(main(["plugin", *sys.argv[1:]]))
