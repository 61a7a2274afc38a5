"""Which codecs a codec block is built with (``contract.build.NicBuild.codecs``): a codec left out is not
built at all, and a ``cfg_codec`` naming it passes the data through as ``none`` (the command processor never
starts a descriptor that asks for it: it completes with ``unsupported``)."""

from amaranth import C

from contract.build import codec_set
from contract.enums import Codec

ALL = frozenset(Codec)
BFP = frozenset({Codec.bfp8, Codec.bfp4})


def selects(codec, built: frozenset, *which):
    """``codec`` (a signal) names one of ``which`` that is ``built`` (constant 0 when none of them is)."""
    out = C(0, 1)
    for c in which:
        if c in built:
            out = out | (codec == c)
    return out


def is_bfp8(codec, built: frozenset):
    """The BFP encoder's or decoder's width select: ``codec`` is bfp8; a constant when only one BFP codec is
    built (the other width's logic then folds away)."""
    return codec == Codec.bfp8 if BFP <= built else C(Codec.bfp8 in built, 1)
