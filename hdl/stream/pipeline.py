"""Free-running pipeline stages: registers that advance every cycle, without an enable.

A computation cut into stages this way has a fixed latency and never stalls; a
:class:`~hdl.stream.credit_buffer.CreditBuffer` behind it turns it back into a stream with backpressure.
Registers without an enable or a reset are the cheapest an FPGA has (no clock-enable net fans out to every
bit), which is why the codecs and the adders are written in this style.

The combinational functions of the datapath take a ``stage`` argument: :func:`register` (a pipeline
register) or :func:`wire` (no register: the same function as one combinational cone, as the unit tests of
the numerics drive it).
"""

from amaranth import Signal, Value


def register(m, value, name: str, reset: bool = False) -> Signal:
    """``value`` through a register, reset-less unless ``reset`` (pipeline data needs no reset; the valid
    bit beside it does)."""
    sig = Signal(len(Value.cast(value)), name=name, reset_less=not reset)
    m.d.sync += sig.eq(value)
    return sig


def wire(m, value, name: str, **kwargs):
    """No register: :func:`register`'s stand-in for a combinational build of a staged function."""
    return value


def delay(m, value, cycles: int, name: str, stage=register, **kwargs):
    """``value`` through ``cycles`` registers (``kwargs``: to ``stage``)."""
    for i in range(cycles):
        value = stage(m, value, f"{name}_d{i}", **kwargs)
    return value


__all__ = ["delay", "register", "wire"]
