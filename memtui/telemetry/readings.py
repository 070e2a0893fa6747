"""A GPU's sensor readings as every view writes them: "67°C", "412/700 W" (pure: no I/O).

One formatter for the dashboard's GPU rows and detail view and `memtui watch`'s table, beside
the snapshot whose fields it reads (memtui/telemetry/models.py: NVML's units, degrees Celsius
and milliwatts). None where the GPU does not give the reading: each view says that its way
(a row leaves it out, a table cell says "n/a").
"""

from __future__ import annotations

from memtui.telemetry.models import DeviceSnapshot


def watts(milliwatts: int) -> str:
    """Milliwatts (NVML's power unit) as whole watts: "412 W"."""
    return f"{milliwatts / 1000:.0f} W"


def temperature(device: DeviceSnapshot) -> str | None:
    """The core temperature: "67°C"."""
    return None if device.temperature_c is None else f"{device.temperature_c}°C"


def power(device: DeviceSnapshot) -> str | None:
    """The power draw, over the enforced limit when it was read: "412/700 W" ("412 W")."""
    if device.power_mw is None:
        return None
    if not device.power_limit_mw:
        return watts(device.power_mw)
    return f"{device.power_mw / 1000:.0f}/{watts(device.power_limit_mw)}"
