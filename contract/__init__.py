"""The ainic contract: every definition that the RTL, the driver, the golden models and the tests share.

Pure Python, importing nothing but the standard library (not Amaranth, cocotb, scapy or NumPy), so that
every other layer may depend on it and it depends on none of them (docs/contributing.md, "Layers"):

* :mod:`contract.enums` -- codecs, element types, descriptor and frame opcodes, collectives, phase kinds,
  drop reasons, completion statuses (``enum.IntEnum``: Amaranth takes them as shapes).
* :mod:`contract.protocol` -- frame and header sizes, the header field lists the scapy layer and the RTL
  layouts are both derived from, packet limits, bytes on the wire per codec.
* :mod:`contract.limits` -- data widths, rank and node limits.
* :mod:`contract.collective` -- the one check of a collective's parameters (``ainic demo``, ``ainic model``,
  the cluster harness).
* :mod:`contract.regmap` -- the register map (generates the RTL block, driver constants, docs, C header).
* :mod:`contract.descriptors` -- descriptor and completion formats, status meanings, the descriptor checks.
* :mod:`contract.credits` -- the receive-credit rules.
* :mod:`contract.stages` -- the collective engine's stages as its debug port ``dbg_stages`` reports them.
* :mod:`contract.addresses` -- the simulated cluster's addresses (NICs, switch, leaves) and the integers
  that address registers hold.
* :mod:`contract.in_network` -- in-network aggregation: the switch's rank, port and job limits, packet
  numbers and slots, the worker's timer defaults, the links' fault generator.
"""
