"""Where candidates run: in this process (`InProcess`) or on a Dask cluster, one worker per Vulkan device
(`DaskDevices`, built on `workbench.fanout.cluster`: the same worker plugin, resources and routing as
`workbench sweep`).

Both give `devices` (device key -> how many workers serve it: how many candidates of that device one round can
measure at once), `env` (device key -> device and driver names, for rows that measured nothing) and `evaluate(sweep, requests)`: requests are (device key, config) pairs; the answer is each
request's rows, in order.
"""
from __future__ import annotations

import time
import uuid

__all__ = ["InProcess", "DaskDevices"]


class InProcess:
    """Candidates measured one after the other on this process's current device."""

    def __init__(self, device=None):
        from .. import vk
        from ..fanout.items import device_keys
        self.device = device or vk.get_device()
        self.devices = {device_keys(self.device.info)["key"]: 1}
        self.env = {key: {"device": self.device.info.name, "driver": self.device.info.driver_name}
                    for key in self.devices}
        self.description = f"in-process on {self.device.info.name}"

    def evaluate(self, sweep, requests) -> list[list[dict]]:
        from .. import vk
        from ..fanout.items import WorkItem, execute_item
        if vk.get_device() is not self.device:  # execute_item runs on the current device
            raise ValueError("InProcess evaluates on the current device (vk.get_device()); set it with vk.set_device")
        return [execute_item(sweep, WorkItem(sweep.name, key, tuple(config.items())))
                for key, config in requests]

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _run_candidate(sweep, item):
    from distributed import get_worker

    from ..fanout.items import execute_item
    return execute_item(sweep, item, get_worker().address)


class DaskDevices:
    """A Dask cluster whose workers each serve one Vulkan device: a local one (`workers`: device selectors, one
    worker each; default one per local GPU, else per CPU device) or an existing one (`scheduler` address).
    `devices`: keep device keys containing one of these strings (ValueError when one matches no worker)."""

    def __init__(self, *, scheduler: str | None = None, workers=None, devices=None, connect_timeout: float = 30.0):
        from distributed import Client

        from ..fanout.cluster import PLUGIN_NAME, DevicePlugin, start_local_cluster, worker_probe
        start = time.perf_counter()
        self.cluster = None
        if scheduler is None:
            self.cluster, selectors = start_local_cluster(workers)
            self.client = Client(self.cluster, timeout=connect_timeout)
            self.client.wait_for_workers(len(selectors), timeout=connect_timeout)
        else:
            self.client = Client(scheduler, timeout=connect_timeout)
        try:
            self.client.register_plugin(DevicePlugin(), name=PLUGIN_NAME)
            probes = [p for p in self.client.run(worker_probe).values() if p is not None]
            self.devices, self.env = {}, {}
            for p in probes:
                if p["error"] is None:
                    self.devices[p["key"]] = self.devices.get(p["key"], 0) + 1
                    self.env[p["key"]] = {"device": p["device"], "driver": p["driver"]}
            if devices:
                wanted = [str(d) for d in devices]
                missing = [w for w in wanted if not any(w.lower() in k.lower() for k in self.devices)]
                if missing:
                    raise ValueError(f"no worker has a Vulkan device matching {missing}; workers have: "
                                     f"{sorted(self.devices) or 'none'}")
                self.devices = {k: n for k, n in self.devices.items()
                                if any(w.lower() in k.lower() for w in wanted)}
            if not self.devices:
                errors = sorted({p["error"] for p in probes if p["error"]})
                raise ValueError(f"no worker of the cluster serves a Vulkan device ({'; '.join(errors) or 'none'})")
        except Exception:
            self.close()
            raise
        self.startup_s = time.perf_counter() - start
        self.description = f"Dask at {self.client.scheduler.address}: " + ", ".join(
            f"{k} ×{n}" for k, n in sorted(self.devices.items()))

    def evaluate(self, sweep, requests) -> list[list[dict]]:
        from ..fanout.cluster import resource_name
        from ..fanout.items import WorkItem, error_rows
        token = uuid.uuid4().hex[:8]
        futures = []
        for i, (key, config) in enumerate(requests):
            item = WorkItem(sweep.name, key, tuple(config.items()))
            futures.append((item, self.client.submit(_run_candidate, sweep, item, key=f"tune-{token}-{i:04d}",
                                                     pure=False, resources={resource_name(key): 1})))
        out = []
        for item, fut in futures:
            try:
                out.append(fut.result())
            except Exception as error:  # e.g. KilledWorker: the candidate killed its workers too often
                out.append(error_rows(sweep, [item], item.device, f"{type(error).__name__}: {error}"))
        return out

    def close(self):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
