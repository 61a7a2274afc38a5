"""Codec codes shared by the RTL, the register map and the wire header (from the golden model)."""

from host_driver.numerics import CODECS

CODEC_NONE = CODECS["none"]
CODEC_FP16 = CODECS["fp16"]
CODEC_BF16 = CODECS["bf16"]
CODEC_BFP8 = CODECS["bfp8"]
CODEC_BFP4 = CODECS["bfp4"]
CODEC_BITS = 3
