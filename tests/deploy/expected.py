"""What the rules must answer for a bundled scenario, computed from its JSON alone.

Deliberately independent of the agent's code: the figures come from the scenario file (the
GPUs, the kubelet's allocations, the processes and their cgroups) and the rules' documented
meaning, so a live answer that matches them proves the agent, the wire and the rules together.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from falcon_gpu.simulator.scenario.parse import resolve_scenario


def last(value: Any) -> Any:
    """A scenario number may be a list, one per cycle, the last repeating."""
    return value[-1] if isinstance(value, list) else value


@dataclass(frozen=True)
class Expected:
    scenario: dict[str, Any]

    @classmethod
    def load(cls, name: str) -> Expected:
        return cls(json.loads(resolve_scenario(name).read_text()))

    @property
    def gpus(self) -> list[dict[str, Any]]:
        return list(self.scenario["gpus"])

    def models(self) -> Counter[str]:
        return Counter(g["name"] for g in self.gpus)

    def _fraction(self) -> dict[str, float]:
        """GPU-equivalents of every schedulable device id: 1 a GPU, memory share a MIG instance."""
        out: dict[str, float] = {}
        for gpu in self.gpus:
            out[gpu["uuid"]] = 1.0
            for mig in gpu.get("mig", []):
                out[mig["uuid"]] = mig["memory_total_bytes"] / gpu["memory_total_bytes"]
        return out

    def _allocations(self) -> list[tuple[str, str, str, str]]:
        """(namespace, pod, container, device) once per device, replicas ``::n`` folded."""
        out = set()
        for pod in self.scenario["host"]["pod_resources"]:
            for container in pod["containers"]:
                for devices in container.get("devices", []):
                    for device_id in devices["device_ids"]:
                        out.add((pod["namespace"], pod["name"], container["name"], device_id.split("::")[0]))
        return sorted(out)

    def allocated_by_namespace(self) -> dict[str, float]:
        """GPUs held per namespace: a device shared by n containers charges each 1/n."""
        holders = Counter(device for *_, device in self._allocations())
        fraction = self._fraction()
        out: dict[str, float] = defaultdict(float)
        for namespace, _pod, _container, device in self._allocations():
            out[namespace] += fraction[device] / holders[device]
        return dict(out)

    def free_devices(self) -> int:
        """What the device plugin advertises (whole GPUs not in MIG mode, MIG instances) minus allocated."""
        allocatable = sum(len(g["mig"]) if g.get("mig") else 1 for g in self.gpus)
        return allocatable - len({device for *_, device in self._allocations()})

    def failing_gpus(self) -> set[str]:
        """GPUs that must report health 2: lost, or in hardware thermal slowdown."""
        return {
            g["uuid"]
            for g in self.gpus
            if g.get("lost_at_cycle") is not None or "hw_thermal" in g.get("clock_event_reasons", [])
        }

    def pod_process(self, namespace: str, pod: str, container: str) -> dict[str, Any]:
        """The one process of a container: found through its container id in the log file name
        and the process's cgroup, the way attribution finds it."""
        host = self.scenario["host"]
        prefix = f"{pod}_{namespace}_{container}-"
        (log,) = [n for n in host["log_containers"] if n.startswith(prefix)]
        container_id = log.removeprefix(prefix).removesuffix(".log")
        (pid,) = [int(p) for p, entry in host["proc"].items() if container_id in entry["cgroup"]]
        for gpu in self.gpus:
            for process in gpu.get("processes", []):
                if process["pid"] == pid:
                    return dict(process)
        raise AssertionError(f"no process {pid} for {namespace}/{pod}/{container}")

    def requested(self, namespace: str, pod: str, container: str) -> tuple[float | None, float | None]:
        """(memory bytes, compute share) the container's ``api_pods`` limits give, by HAMi's units
        (gpumem MiB, gpucores percent; 0 is no quota); a plain GPU or replica is compute 1."""
        (entry,) = [
            p for p in self.scenario["host"]["api_pods"] if (p["namespace"], p["name"]) == (namespace, pod)
        ]
        (spec,) = [c for c in entry["containers"] if c["name"] == container]
        limits = {k: int(v) for k, v in spec.get("limits", {}).items() if v.isdigit()}
        memory = limits.get("nvidia.com/gpumem", 0) * 2**20 or None
        hami = "nvidia.com/gpumem" in limits or "nvidia.com/gpucores" in limits
        compute = limits.get("nvidia.com/gpucores", 0) / 100 or (None if hami else 1.0)
        return (float(memory) if memory else None), compute

    def xids(self) -> set[tuple[str, str]]:
        """(uuid, xid) of every XID event the scenario raises."""
        return {(g["uuid"], str(e["xid"])) for g in self.gpus for e in g.get("xid_events", [])}

    def rising_uncorrectable_ecc(self) -> set[str]:
        """GPUs whose volatile uncorrectable ECC count grows during the scenario."""
        out = set()
        for gpu in self.gpus:
            counts = gpu.get("ecc", {}).get("uncorrected_volatile", 0)
            if isinstance(counts, list) and counts[-1] > counts[0]:
                out.add(gpu["uuid"])
        return out
