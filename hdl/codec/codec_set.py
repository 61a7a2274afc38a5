"""Which codecs a codec block is built with (``contract.build.NicBuild.codecs``): a codec left out is not
built at all, and a ``cfg_codec`` naming it passes the data through as ``none`` (the command processor never
starts a descriptor that asks for it: it completes with ``unsupported``)."""

from amaranth import C

from contract.enums import Codec

ALL = frozenset(Codec)


def check_codecs(codecs) -> frozenset:
    codecs = frozenset(Codec(c) for c in codecs)
    if Codec.none not in codecs:
        raise ValueError("codec none is always built")
    return codecs


def selects(codec, built: frozenset, *which):
    """``codec`` (a signal) names one of ``which`` that is ``built`` (constant 0 when none of them is)."""
    out = C(0, 1)
    for c in which:
        if c in built:
            out = out | (codec == c)
    return out
