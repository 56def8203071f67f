"""A stand-in for the NVML *library* (and, optionally, the host around it), driven by a JSON scenario.

Only the library is replaced: the NVML source, attribution, schemas and sinks run
their real code paths against it. See CONTRACT section 5 for the scenario format.

* ``scenario/``: the scenario format, typed and strictly parsed;
* ``scenarios/``: the bundled scenario files;
* ``nvml/``: the fake NVML library that serves a scenario;
* ``node/``: the node around the GPUs (proc tree, kubelet, runtimes) laid out on disk.
"""
