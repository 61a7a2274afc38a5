-- Wireshark / tshark dissector for the ainic all-reduce header (docs/protocol.md).
-- Use: tshark -X lua_script:host_driver/models/ainic.lua -r capture.pcap -V
-- or copy this file into Wireshark's personal plugins folder.

local ainic = Proto("ainic", "ainic all-reduce")

local opcodes = { [0] = "data", [1] = "result", [2] = "ack", [3] = "nack" }
local codecs = { [0] = "none", [1] = "fp16", [2] = "bf16", [3] = "bfp8", [4] = "bfp4" }
local dtypes = { [0] = "fp32", [1] = "int32" }

local f = ainic.fields
f.version    = ProtoField.uint8("ainic.version", "Version", base.DEC)
f.opcode     = ProtoField.uint8("ainic.opcode", "Opcode", base.DEC, opcodes)
f.codec      = ProtoField.uint8("ainic.codec", "Codec", base.DEC, codecs, 0xF0)
f.dtype      = ProtoField.uint8("ainic.dtype", "Element type", base.DEC, dtypes, 0x0F)
f.flags      = ProtoField.uint8("ainic.flags", "Flags", base.HEX)
f.retransmit = ProtoField.bool("ainic.flags.retransmit", "Retransmission", 8, nil, 0x01)
f.last       = ProtoField.bool("ainic.flags.last", "Last packet of chunk", 8, nil, 0x02)
f.shadow     = ProtoField.bool("ainic.flags.shadow", "Shadow pool", 8, nil, 0x04)
f.job        = ProtoField.uint16("ainic.job", "Job", base.DEC)
f.collective = ProtoField.uint16("ainic.collective", "Collective", base.DEC)
f.src_rank   = ProtoField.uint16("ainic.src_rank", "Source rank", base.DEC)
f.dst_rank   = ProtoField.uint16("ainic.dst_rank", "Destination rank", base.DEC)
f.chunk      = ProtoField.uint16("ainic.chunk", "Chunk index", base.DEC)
f.worker     = ProtoField.uint16("ainic.worker", "Worker id", base.DEC)
f.slot       = ProtoField.uint16("ainic.slot", "Aggregation slot", base.DEC)
f.count      = ProtoField.uint16("ainic.count", "Element count", base.DEC)
f.offset     = ProtoField.uint32("ainic.offset", "Element offset", base.DEC)
f.psn        = ProtoField.uint32("ainic.psn", "Packet sequence number", base.DEC)
f.reserved   = ProtoField.uint32("ainic.reserved", "Reserved", base.HEX)
f.payload    = ProtoField.bytes("ainic.payload", "Payload")

local HEADER = 32

function ainic.dissector(buf, pinfo, tree)
    if buf:len() < HEADER then
        return 0
    end
    pinfo.cols.protocol = "AINIC"
    local t = tree:add(ainic, buf(0, HEADER))
    t:add(f.version, buf(0, 1))
    t:add(f.opcode, buf(1, 1))
    t:add(f.codec, buf(2, 1))
    t:add(f.dtype, buf(2, 1))
    local fl = t:add(f.flags, buf(3, 1))
    fl:add(f.retransmit, buf(3, 1))
    fl:add(f.last, buf(3, 1))
    fl:add(f.shadow, buf(3, 1))
    t:add(f.job, buf(4, 2))
    t:add(f.collective, buf(6, 2))
    t:add(f.src_rank, buf(8, 2))
    t:add(f.dst_rank, buf(10, 2))
    t:add(f.chunk, buf(12, 2))
    t:add(f.worker, buf(14, 2))
    t:add(f.slot, buf(16, 2))
    t:add(f.count, buf(18, 2))
    t:add(f.offset, buf(20, 4))
    t:add(f.psn, buf(24, 4))
    t:add(f.reserved, buf(28, 4))
    local op = opcodes[buf(1, 1):uint()] or "?"
    pinfo.cols.info = string.format("ainic %s rank %d->%d chunk %d offset %d count %d psn %d %s",
        op, buf(8, 2):uint(), buf(10, 2):uint(), buf(12, 2):uint(), buf(20, 4):uint(), buf(18, 2):uint(),
        buf(24, 4):uint(), codecs[bit.rshift(buf(2, 1):uint(), 4)] or "?")
    if buf:len() > HEADER then
        tree:add(f.payload, buf(HEADER))
    end
    return buf:len()
end

DissectorTable.get("udp.port"):add(16713, ainic)
