"""The fake NVML library: ``library.SimulatedNvml`` and the call groups it is made of.

``core`` holds the state every group shares (scenario, cycle, handles, call
counts); ``device``, ``processes``, ``events`` and ``gpm`` answer the NVML
functions of their kind with pynvml's names, structs and errors.
"""
