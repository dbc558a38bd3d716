"""What the machine running a run can hold: the host's available memory and one device's limit, read
when a run is checked against engine/memory.py's estimate (the engine reads no files, so the host's
figures live here)."""

import os


def host_available() -> int:
    """Bytes the host can still give (MemAvailable), or its physical memory when that is unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_limit(device) -> tuple[int, str]:
    """(bytes one device can hold, what it is): the allocator's limit on an accelerator, the host's
    available memory on a CPU."""
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.device_kind} memory"
    return host_available(), "available host memory"


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} EB"
