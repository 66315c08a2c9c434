"""What a trace event's `args` say, each value checked for its type: a value of another
type (text, null, an object) is unknown, never an exception."""

from __future__ import annotations

import math


def correlation(args: dict) -> int:
    value = args.get("correlation", -1)
    return value if isinstance(value, int) else -1


def external_id(args: dict) -> int:
    value = args.get("External id", args.get("external id", -1))
    return value if isinstance(value, int) else -1


def device_args(args: dict) -> tuple[float, float, float, float]:
    """A device activity's bytes (0 unknown), device, blocks per SM and estimated achieved
    occupancy (a share; NaN unknown)."""
    values = [args.get(key) for key in ("bytes", "device", "blocks per SM",
                                        "est. achieved occupancy %")]
    known = [float(v) if isinstance(v, int | float) else math.nan for v in values]
    return (0.0 if math.isnan(known[0]) else known[0], known[1], known[2], known[3] / 100)


def memory_record(event: dict) -> tuple:
    """A `[memory]` instant's (thread, ts, device, bytes, total allocated, total reserved):
    the device `CPU` or `GPU<id>` as TensorBoard's plugin names them (`?` for another
    type), numbers NaN where unknown (the event is then left out of the memory view)."""
    args = event.get("args")
    args = args if type(args) is dict else {}
    kind, number = args.get("Device Type"), args.get("Device Id")
    device = "CPU" if kind == 0 else f"GPU{number}" if kind == 1 else "?"
    numbers = [args.get(key) for key in ("Bytes", "Total Allocated", "Total Reserved")]
    ts = event.get("ts")
    return (f"{event.get('pid')}:{event.get('tid')}",
            float(ts) if isinstance(ts, int | float) else math.nan, device,
            *(float(v) if isinstance(v, int | float) else math.nan for v in numbers))


def span(event: dict) -> tuple[float, float] | None:
    """An event's (ts, dur), where both are finite numbers and dur is positive."""
    ts, dur = event.get("ts"), event.get("dur")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                  for v in (ts, dur))
    return (float(ts), float(dur)) if numbers and dur > 0 else None
