"""Dask distributed under the sweeps: a local cluster of one worker per Vulkan device, or an existing one.

- Each worker process serves one device (WORKBENCH_DEVICE in its environment) and runs one item at a time
  (1 thread; GPU timings must not overlap on a device).
- A worker plugin probes the device in every worker, also in workers that join or are restarted later, and
  advertises it as Dask resources ("vulkan:<device key>"); an item asks for its device's resource, so the
  scheduler sends it to a worker with that device, and runs it elsewhere when its worker dies (the nanny starts a
  new one, the scheduler reschedules what was lost; after `distributed.scheduler.allowed-failures` deaths an item
  becomes an error row).
- The gatherer keeps one result per item key and appends rows to the writer as items finish; Ctrl-C cancels what
  is left, keeps the rows already written, and shuts the local cluster down.
Everything listens on 127.0.0.1 unless given a scheduler address.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field

import pandas as pd
from distributed import WorkerPlugin

from .items import WorkItem, error_rows, execute_item, probe_device

RESOURCE_PREFIX = "vulkan:"
PLUGIN_NAME = "workbench-vulkan-device"
_probe: dict | None = None  # in a worker process: what DevicePlugin found


def resource_name(device_key: str) -> str:
    return RESOURCE_PREFIX + device_key


class DevicePlugin(WorkerPlugin):
    """Probes the worker's Vulkan device and advertises both of its keys as resources. A worker under a nanny
    leaves Ctrl-C to the process that owns the nanny: a terminal's Ctrl-C reaches the whole process group, and a
    worker that took it died mid-item with a traceback, racing its nanny (which may restart it) while the sweep's
    process cancelled the items and closed the cluster."""

    name = PLUGIN_NAME

    async def setup(self, worker):
        global _probe
        if worker.nanny is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        _probe = probe_device(worker.address)
        if _probe["error"] is None:
            await worker.set_resources(**{resource_name(_probe["key"]): 1, resource_name(_probe["physical_key"]): 1})


def worker_probe() -> dict | None:
    """Run on a worker (client.run): its probe."""
    return _probe


def _run_item(sweep, item: WorkItem) -> list[dict]:
    from distributed import get_worker
    return execute_item(sweep, item, get_worker().address)


def local_workers(selectors=None) -> list[str]:
    """Device selectors of the local cluster: one worker per entry. Default: one per local GPU, or one per CPU
    device where there is no GPU (lavapipe beside GPUs would compete with their workers for the host's cores;
    name it in `selectors` to include it)."""
    if selectors:
        return [str(s).strip() for s in selectors if str(s).strip() != ""]
    from .. import vk
    devices = vk.list_devices()
    gpus = [d for d in devices if not d.is_cpu]
    return [str(d.index) for d in (gpus or devices)]


def start_local_cluster(selectors=None, *, silence_logs: int = logging.ERROR):
    """A cluster on this machine, all on 127.0.0.1: a scheduler and one nanny-supervised worker process per
    selector (WORKBENCH_DEVICE=<selector> in its environment, 1 thread). Returns (cluster, selectors)."""
    from distributed import Nanny, Scheduler, SpecCluster
    selectors = local_workers(selectors)
    if not selectors:
        raise ValueError("no Vulkan device found for a local cluster (vk.list_devices() is empty)")
    workers = {f"vk{i}-dev{sel}": {"cls": Nanny, "options": {
        "nthreads": 1, "host": "127.0.0.1", "env": {"WORKBENCH_DEVICE": sel}, "dashboard": False,
        "memory_limit": 0, "silence_logs": silence_logs}}
        for i, sel in enumerate(selectors)}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "port": 0, "dashboard": False,
                                               "dashboard_address": "127.0.0.1:0"}}
    cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=silence_logs, name="workbench")
    return cluster, selectors


@dataclass
class SweepResult:
    frame: pd.DataFrame             # one row per measurement, every device, deduplicated by item
    devices: pd.DataFrame           # one row per worker: its device, how many items and errors
    items: int
    wall_s: float                   # submitting the first item → the last result
    startup_s: float                # cluster start (or connect) + device probes
    scheduler: str
    duplicates_dropped: int = 0
    paths: dict = field(default_factory=dict)


def run_sweep(sweep, *, scheduler: str | None = None, workers=None, each_device: bool = False, devices=None,
              writer=None, on_result=None, show_progress: bool = True, connect_timeout: float = 30.0,
              orphan_timeout_s: float = 60.0) -> SweepResult:
    """Run `sweep` (workbench.fanout.items) on every device of the cluster → one tidy DataFrame.

    scheduler: None starts a local cluster (`workers`: device selectors, one worker each; default one per local
    GPU, else per CPU device) and shuts it down at the end; "tcp://host:port" joins an existing cluster (its workers serve the
    devices WORKBENCH_DEVICE picked for them). each_device: identical devices each run every item (comparison)
    instead of sharing the items (throughput). devices: keep only device keys containing one of these strings;
    one that matches no worker gives error rows. writer: a measure.ResultsWriter, fed as items finish.
    on_result(item, rows): called after each item (tests use it to kill a worker mid-sweep).
    orphan_timeout_s: items whose device no worker has served for that long become error rows (a host that left).
    Ctrl-C (KeyboardInterrupt) cancels what is left and is raised again with `.partial`, the SweepResult so far."""
    from distributed import Client
    t0 = time.perf_counter()
    cluster = client = gather = None
    try:  # a Ctrl-C during start-up closes what was started, too
        if scheduler is None:
            cluster, selectors = start_local_cluster(workers)
            client = Client(cluster, timeout=connect_timeout)
            client.wait_for_workers(len(selectors), timeout=connect_timeout)
        else:
            client = Client(scheduler, timeout=connect_timeout)
        client.register_plugin(DevicePlugin(), name=PLUGIN_NAME)
        probes = {addr: p for addr, p in client.run(worker_probe).items() if p is not None}
        startup_s = time.perf_counter() - t0
        plan_items, unrunnable = _plan(sweep, probes, each_device, devices)
        gather = _Gatherer(client, sweep, plan_items, unrunnable, writer, on_result, orphan_timeout_s)
        gather.run(f"{sweep.name} on {len(probes)} workers" if show_progress else None)
        probes.update({a: p for a, p in client.run(worker_probe).items() if p is not None})  # restarted workers
        return gather.result(probes, startup_s, client.scheduler.address)
    except KeyboardInterrupt as interrupt:
        if gather is not None:
            gather.cancel()
            interrupt.partial = gather.result(probes, startup_s, client.scheduler.address)
        raise
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


class _Gatherer:
    """Submits the items, collects results as they finish (one per item key), feeds the writer, and gives up on
    items whose device no worker serves any more."""

    POLL_S = 0.02
    # a finished item's rows are fetched from the worker that ran it; where that worker has left since, the fetch
    # waits for a recomputation that may never come: after FETCH_S the item is watched again instead (run on
    # another worker of its device, or given up as an orphan)
    FETCH_S = 5.0

    def __init__(self, client, sweep, items, unrunnable, writer, on_result, orphan_timeout_s):
        self.client, self.sweep, self.items = client, sweep, items
        self.writer, self.on_result, self.orphan_timeout_s = writer, on_result, orphan_timeout_s
        self.unrunnable = unrunnable
        self.rows: dict[str, list[dict]] = {}
        self.duplicates = 0
        self.futures: dict = {}
        self.pending = None  # the futures watched (`run`'s as_completed)
        self.wall_s = 0.0
        for row in unrunnable:
            self._write(row)

    def _write(self, row):
        if self.writer is not None:
            self.writer.append(row)

    def run(self, progress_label: str | None):
        from distributed import as_completed
        token = uuid.uuid4().hex[:8]
        start = time.perf_counter()
        for i, item in enumerate(self.items):
            fut = self.client.submit(_run_item, self.sweep, item, key=f"workbench-{token}-{i:05d}", pure=False,
                                     resources={resource_name(item.device): 1})
            self.futures[fut] = item
        bar = None
        if progress_label:
            from tqdm.auto import tqdm
            bar = tqdm(total=len(self.items), desc=progress_label)
        pending = self.pending = as_completed(list(self.futures))
        served_at: dict[str, float] = {}
        next_check = time.monotonic() + 1.0
        try:
            while not pending.is_empty():
                done = pending.next_batch(block=False)
                for fut in done:
                    if self._collect(fut) and bar is not None:
                        bar.update(1)
                if not done:
                    if time.monotonic() >= next_check:
                        next_check = time.monotonic() + 1.0
                        given_up = self._abandon_orphans(served_at)
                        if given_up and bar is not None:
                            bar.update(given_up)
                    time.sleep(self.POLL_S)
        finally:
            self.wall_s = time.perf_counter() - start
            if bar is not None:
                bar.close()

    def _collect(self, fut) -> bool:
        item = self.futures[fut]
        if item.key in self.rows:  # reported twice (or given up on before): keep the first
            self.duplicates += fut.status != "cancelled"
            return False
        try:
            rows = fut.result(timeout=self.FETCH_S)
        except Exception as error:  # e.g. KilledWorker: the item killed its workers too often
            if isinstance(error, TimeoutError) and fut.status != "error":  # its rows left with its worker (FETCH_S)
                self.pending.add(fut)
                return False
            rows = error_rows(self.sweep, [item], item.device, f"{type(error).__name__}: {error}")
        self._finish(item, rows)
        return True

    def _finish(self, item, rows):
        self.rows[item.key] = rows
        for row in rows:
            self._write(row)
        if self.on_result is not None:
            self.on_result(item, rows)

    def _abandon_orphans(self, served_at: dict) -> int:
        """Error rows for unfinished items whose device no worker has served for orphan_timeout_s."""
        now = time.monotonic()
        resources = set()
        for w in self.client.scheduler_info()["workers"].values():
            resources.update(w.get("resources") or {})
        given_up = 0
        open_items = [(f, i) for f, i in self.futures.items() if i.key not in self.rows and not f.done()]
        for key in {i.device for _, i in open_items}:
            if resource_name(key) in resources:
                served_at[key] = now
                continue
            if now - served_at.setdefault(key, now) < self.orphan_timeout_s:
                continue
            lost = [(f, i) for f, i in open_items if i.device == key]
            self.client.cancel([f for f, _ in lost])
            for _, item in lost:
                self._finish(item, error_rows(self.sweep, [item], key, f"DeviceLostError: no worker has served "
                                              f"device {key!r} for {self.orphan_timeout_s:.0f} s (its workers "
                                              "left the cluster)"))
            given_up += len(lost)
        return given_up

    def cancel(self):
        self.client.cancel([f for f in self.futures if not f.done()])

    def result(self, probes, startup_s, scheduler) -> SweepResult:
        order = [item.key for item in self.items]
        frame = pd.DataFrame(self.unrunnable + [row for key in order for row in self.rows.get(key, [])])
        return SweepResult(frame, _device_table(probes, frame), len(self.items), self.wall_s, startup_s, scheduler,
                           self.duplicates)


def _plan(sweep, probes: dict, each_device: bool, wanted) -> tuple[list[WorkItem], list[dict]]:
    """Items for every device key the workers serve (filtered by `wanted`), and error rows for devices that
    cannot run: a worker whose device is missing, a wanted device no worker has."""
    key_field = "physical_key" if each_device else "key"
    keys = sorted({p[key_field] for p in probes.values() if p["error"] is None})
    errors = []
    params = sweep.items()
    if wanted:
        wanted = [str(w) for w in wanted]
        for w in wanted:
            if not any(w.lower() in k.lower() for k in keys):
                items = [WorkItem(sweep.name, w, p) for p in params]
                have = "; ".join(keys) or "none"
                errors.extend(error_rows(sweep, items, w, f"DeviceNotFoundError: no worker has a Vulkan device "
                                                         f"matching {w!r}; workers have: {have}"))
        keys = [k for k in keys if any(w.lower() in k.lower() for w in wanted)]
    for addr, p in sorted(probes.items()):
        if p["error"] is not None:
            label = f"WORKBENCH_DEVICE={p['selector']} on {p['host']}"
            items = [WorkItem(sweep.name, label, q) for q in params]
            errors.extend(error_rows(sweep, items, label, p["error"], worker=addr))
    return [WorkItem(sweep.name, key, p) for key in keys for p in params], errors


def _device_table(probes: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """Which workers and devices took part, with their item and error counts."""
    rows = []
    ran = set(frame["worker"].dropna()) if "worker" in frame else set()
    for addr, p in sorted(probes.items()):
        if addr not in ran and p["error"] is None and len(frame):
            continue  # a worker that joined after the sweep and ran nothing
        mine = frame[frame["worker"] == addr] if "worker" in frame else frame.iloc[:0]
        errors = int(mine["error"].notna().sum()) if "error" in mine else 0
        rows.append({"worker": addr, "host": p["host"], "pid": p["pid"], "selector": p["selector"],
                     "device": p["device"] or f"(missing: {p['error']})", "index": p["index"],
                     "driver": p["driver"], "items": int(mine["item"].nunique()) if len(mine) else 0,
                     "rows": len(mine), "errors": errors})
    return pd.DataFrame(rows)


def join_cluster(address: str, selectors=None, *, host: str | None = None, on_started=None) -> None:
    """Serve this machine's Vulkan devices to the cluster at `address`: one nanny-supervised worker per selector
    (default one per local GPU, else per CPU device), 1 thread each, until interrupted. `host`: the interface to listen on (default:
    Dask's choice; 127.0.0.1 keeps a same-machine cluster off the network)."""
    import asyncio
    import socket

    from distributed import Nanny
    selectors = local_workers(selectors)

    async def serve():
        nannies = [Nanny(address, nthreads=1, host=host, env={"WORKBENCH_DEVICE": sel}, dashboard=False,
                         memory_limit=0, name=f"{socket.gethostname()}-vk{i}-dev{sel}")
                   for i, sel in enumerate(selectors)]
        await asyncio.gather(*nannies)
        if on_started is not None:
            on_started([n.worker_address for n in nannies])
        try:
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    asyncio.run(serve())
