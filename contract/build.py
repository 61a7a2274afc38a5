"""What a NIC build contains: chosen when its Verilog is generated, announced in the CAPS register, honoured by
the command processor (a descriptor that asks for what was not built completes with ``unsupported``) and
refused first by the driver (``host_driver.driver.nic.Unsupported``).

A build leaves out hardware, never behaviour: what it keeps works exactly as in the full NIC, bit for bit.
:data:`BUILDS` are the shipped ones (``make report`` packs each at W = 64; ``ainic verilog --top nic_small``
exports the small one):

* ``full``: every codec, the switch client, a 64-entry peer table, the default receive geometry.
* ``small``: ``none``, ``fp16`` and ``bfp8``; the switch client; an 8-entry peer table; the receive
  geometry of :data:`contract.credits.DEFAULT`; a 16 KiB frame store (the default window, 32 frames, of
  compressed 256-element frames: fp16's and bfp8's; a switch job whose window of frames does not fit resends
  by reading and encoding again, as every NIC does then) -- the configuration that places whole on an ECP5-85
  (its block RAMs: ``tests/flow/test_fit.py``).

The frame store's size changes where a resend is read from (so its timing), never what is sent.
"""

from dataclasses import dataclass, field

from .credits import DEFAULT, Credits
from .enums import Algorithm, Codec, Dtype
from .in_network import NIC_FRAME_STORE_BYTES
from .limits import MAX_RANKS, NIC_WIDTHS


def _mask(members) -> int:
    return sum(1 << int(x) for x in members)


def codec_set(codecs) -> frozenset:
    """A build's codecs as a frozenset of ``Codec`` (``none`` is always built: int32 and copies use it)."""
    codecs = frozenset(Codec(c) for c in codecs)
    if Codec.none not in codecs:
        raise ValueError("codec none is always built (int32 and copies use it)")
    return codecs


@dataclass(frozen=True)
class NicBuild:
    """One NIC configuration (the datapath width is chosen separately: every build exists at every width)."""
    name: str = "full"
    codecs: frozenset = field(default_factory=lambda: frozenset(Codec))
    #: the ring engine is always built (it is the NIC's collective engine); the switch client is optional
    switch: bool = True
    #: peer-table entries: the largest WORLD_SIZE of a ring collective (a power of two, 2 .. MAX_RANKS)
    max_ranks: int = MAX_RANKS
    credits: Credits = DEFAULT
    #: bytes of the switch client's frame store (contract.in_network.frames_fit): a power of two
    frame_store_bytes: int = NIC_FRAME_STORE_BYTES

    def __post_init__(self):
        object.__setattr__(self, "codecs", codec_set(self.codecs))
        fs = self.frame_store_bytes
        if not (isinstance(fs, int) and fs >= 1024 and fs & (fs - 1) == 0):
            raise ValueError(f"build {self.name!r}: frame_store_bytes must be a power of two of 1024 or more, got {fs!r}")
        if not (2 <= self.max_ranks <= MAX_RANKS and self.max_ranks & (self.max_ranks - 1) == 0):
            raise ValueError(f"build {self.name!r}: max_ranks must be a power of two in 2 .. {MAX_RANKS}, "
                             f"got {self.max_ranks}")

    @property
    def features(self) -> tuple:
        """What CAPS tells of the build (not its name or receive geometry)."""
        return self.codecs, self.switch, self.max_ranks

    @property
    def algorithms(self) -> frozenset:
        return frozenset({Algorithm.ring, *((Algorithm.switch,) if self.switch else ())})

    @property
    def dtypes(self) -> frozenset:
        return frozenset(Dtype)

    def caps(self, width: int) -> int:
        """The CAPS register of this build at datapath width ``width`` (fields: contract.regmap)."""
        if width not in NIC_WIDTHS:
            raise ValueError(f"width must be one of {NIC_WIDTHS}, got {width}")
        return ((width // 8) | (self.max_ranks.bit_length() - 1) << 8 | _mask(self.codecs) << 16
                | _mask(self.dtypes) << 24 | _mask(self.algorithms) << 28)

    def missing(self, codec: int, algorithm: int) -> str:
        """What a descriptor asks for that this build lacks ("" when nothing): the driver's refusal text."""
        if codec in Codec._value2member_map_ and Codec(codec) not in self.codecs:
            return f"codec {Codec(codec).name}"
        if algorithm in Algorithm._value2member_map_ and Algorithm(algorithm) not in self.algorithms:
            return f"algorithm {Algorithm(algorithm).name}"
        return ""


def from_caps(value: int) -> tuple:
    """(width, build) from a CAPS value read from a NIC: what the driver knows of the build it drives (its
    name is not in CAPS: a shipped build's name when the features match one, else ``"custom"``)."""
    width = (value & 0xFF) * 8
    codecs = frozenset(c for c in Codec if value >> (16 + c) & 1)
    switch = bool(value >> (28 + Algorithm.switch) & 1)
    max_ranks = 1 << (value >> 8 & 0xFF)
    for b in BUILDS.values():
        if b.features == (codecs, switch, max_ranks):
            return width, b
    return width, NicBuild("custom", codecs, switch, max_ranks)


FULL = NicBuild()
SMALL = NicBuild("small", frozenset({Codec.none, Codec.fp16, Codec.bfp8}), switch=True, max_ranks=8,
                 frame_store_bytes=16 * 1024)
BUILDS = {b.name: b for b in (FULL, SMALL)}
