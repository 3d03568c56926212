"""The clocks of the NVIDIA GPU behind a Vulkan device (NVML, else nvidia-smi): at one moment (`nvml_clocks`: what a
row records beside its times, and what the kernels' device limits fall back to), and sampled while work runs
(`ClockSampler`). No Vulkan here: the device is only asked its name and vendor."""
from __future__ import annotations

import shutil
import subprocess

CLOCK_COLUMNS = ("sm_clock_mhz_median", "sm_clock_mhz_min", "sm_clock_mhz_max", "max_sm_clock_mhz_limit",
                 "power_w_median", "clock_samples", "clock_source", "clock_note")


def nvml_clocks(device) -> dict:
    """{'sm_mhz', 'max_sm_mhz', 'mem_mhz'} of the NVIDIA GPU named like `device` (NVML, else nvidia-smi); {}
    elsewhere or when neither is there."""
    if device.info.vendor != "NVIDIA":
        return {}
    try:
        import pynvml
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        names = [pynvml.nvmlDeviceGetName(h) for h in handles]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        h = next((h for h, n in zip(handles, names) if n == device.info.name), handles[0])
        return {"sm_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "max_sm_mhz": float(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "mem_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)), "source": "NVML"}
    except Exception:  # noqa: BLE001 - no NVML: try the command line
        pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        out = subprocess.run([smi, "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = [[v.strip() for v in line.split(",")] for line in out.strip().splitlines() if line.count(",") == 3]
    if not lines:
        return {}
    fields = next((f for f in lines if f[0] == device.info.name), lines[0])
    try:
        return {"sm_mhz": float(fields[1]), "max_sm_mhz": float(fields[2]), "mem_mhz": float(fields[3]),
                "source": "nvidia-smi"}
    except ValueError:
        return {}


class ClockSampler:
    """The SM clock and power of the NVIDIA GPU behind `device`, sampled every `interval_ms` while a block of work
    runs, so a rate can be normalised to the clock actually held:

        with ClockSampler(device) as clocks:
            ...                                   # the timed work
        row.update(clocks.columns())              # median / min / max SM clock (MHz), max clock, power (W), ...

    Sources: NVML (pynvml) in a background thread, else `nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,
    power.draw --format=csv,noheader,nounits -lms INTERVAL` in a background process. One sample is taken at the
    start and one at the end as well, so short blocks have two. Where neither exists (lavapipe, a GPU of another
    vendor, no driver tools) the columns are NaN and `clock_note` says why; nothing raises."""

    def __init__(self, device, interval_ms: int = 100):
        self.device = device
        self.interval_ms = max(10, int(interval_ms))
        self.samples: list[tuple[float, float, float]] = []  # (sm MHz, max sm MHz, power W)
        self.source: str | None = None
        self.note = ""
        self._thread = None
        self._proc = None
        self._stop = None
        self._nvml = None

    # sources -----------------------------------------------------------------------------------------------
    def _open_nvml(self) -> bool:
        try:
            import pynvml
            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            names = [pynvml.nvmlDeviceGetName(h) for h in handles]
            names = [n.decode() if isinstance(n, bytes) else n for n in names]
            self._nvml = (pynvml, next((h for h, n in zip(handles, names) if n == self.device.info.name),
                                       handles[0]))
            self._read_nvml()
            return True
        except Exception:  # noqa: BLE001 - no NVML: the command line next
            self._nvml = None
            return False

    def _read_nvml(self):
        pynvml, h = self._nvml
        try:
            power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        except Exception:  # noqa: BLE001 - power is optional
            power = float("nan")
        self.samples.append((float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                             float(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)), power))

    def _smi_once(self, smi) -> list[tuple[float, float, float]]:
        out = subprocess.run([smi, "--query-gpu=clocks.sm,clocks.max.sm,power.draw", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return [s for s in map(parse_smi_line, out.splitlines()) if s]

    # the block ------------------------------------------------------------------------------------------------
    def __enter__(self):
        import threading
        if self.device.info.vendor != "NVIDIA":
            self.note = f"no clock source: {self.device.info.name} is not an NVIDIA GPU"
            return self
        self._stop = threading.Event()
        if self._open_nvml():
            self.source = "NVML"

            def poll():
                while not self._stop.wait(self.interval_ms / 1000.0):
                    try:
                        self._read_nvml()
                    except Exception:  # noqa: BLE001 - a failed read loses one sample
                        pass
            self._thread = threading.Thread(target=poll, name="clock sampler", daemon=True)
            self._thread.start()
            return self
        smi = shutil.which("nvidia-smi")
        if not smi:
            self.note = "no clock source: neither pynvml nor nvidia-smi is available"
            return self
        try:
            self.samples.extend(self._smi_once(smi)[:1])
            self._proc = subprocess.Popen([smi, "--query-gpu=clocks.sm,clocks.max.sm,power.draw",
                                           "--format=csv,noheader,nounits", f"-lms={self.interval_ms}"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except (OSError, subprocess.SubprocessError) as exc:
            self.note = f"no clock source: nvidia-smi failed ({exc})"
            return self
        self.source = "nvidia-smi"

        def read():
            for line in self._proc.stdout:
                s = parse_smi_line(line)
                if s:
                    self.samples.append(s)
        self._thread = threading.Thread(target=read, name="clock sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._stop is not None:
            self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if self._nvml is not None:
                self._read_nvml()
            elif self.source == "nvidia-smi":
                self.samples.extend(self._smi_once(shutil.which("nvidia-smi") or "nvidia-smi")[:1])
        except Exception:  # noqa: BLE001 - the closing sample is a bonus
            pass
        if self.source and not self.samples:
            self.note = f"{self.source} gave no samples"
        return False

    def latest(self) -> float:
        """The SM clock (MHz) of the latest reading, NaN where none was taken (no clock source): a sample's clock."""
        return self.samples[-1][0] if self.samples else float("nan")

    def columns(self, at=None) -> dict:
        """The row columns (CLOCK_COLUMNS): NaN with `clock_note` saying why where no sample was taken. `at`: the SM
        clocks to summarise instead of every reading (those `latest` gave as each timed submit ended, where the block
        also held untimed warm-ups)."""
        import math
        import statistics
        nan = math.nan
        at = None if at is None else [c for c in at if c == c]
        if not self.samples or at == []:
            return {"sm_clock_mhz_median": nan, "sm_clock_mhz_min": nan, "sm_clock_mhz_max": nan,
                    "max_sm_clock_mhz_limit": nan, "power_w_median": nan, "clock_samples": 0,
                    "clock_source": self.source or "none", "clock_note": self.note or "no samples"}
        sm = [s[0] for s in self.samples] if at is None else at
        power = [s[2] for s in self.samples if s[2] == s[2]]
        return {"sm_clock_mhz_median": float(statistics.median(sm)), "sm_clock_mhz_min": min(sm),
                "sm_clock_mhz_max": max(sm), "max_sm_clock_mhz_limit": max(s[1] for s in self.samples),
                "power_w_median": float(statistics.median(power)) if power else nan,
                "clock_samples": len(sm), "clock_source": self.source, "clock_note": self.note}


def parse_smi_line(line: str):
    """(sm MHz, max sm MHz, power W) from one `clocks.sm,clocks.max.sm,power.draw` line, or None. A power of
    "[N/A]" reads as NaN."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 3:
        return None
    try:
        sm, top = float(fields[0]), float(fields[1])
    except ValueError:
        return None
    try:
        power = float(fields[2])
    except ValueError:
        power = float("nan")
    return sm, top, power
