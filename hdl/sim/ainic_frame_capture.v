// ainic frame capture (simulation only): writes every beat of an AXI4-Stream of Ethernet frames to a text
// file while `enable` is high, so that the host side can rebuild the frames and write a pcap.
//
// * One line per beat taken (tvalid & tready): "<cycle> <tlast> <tkeep hex> <tdata hex>", tdata byte 0 in
//   its least significant bits (as on the bus). <cycle> counts clock cycles since reset.
// * The file is opened at time 0 (FILE, relative to the simulator's working directory) and flushed on
//   every frame's last beat, so a reader never sees half a frame after the frame has left.
// * Costs nothing while `enable` is low (no file I/O).
`timescale 1ns/1ps
module ainic_frame_capture #(
    parameter DATA_WIDTH = 512,
    parameter FILE = "capture.txt"
) (
    input  wire                      clk,
    input  wire                      rst,
    input  wire                      enable,
    input  wire [DATA_WIDTH-1:0]     tdata,
    input  wire [DATA_WIDTH/8-1:0]   tkeep,
    input  wire                      tlast,
    input  wire                      tvalid,
    input  wire                      tready
);
    integer fd;
    reg [63:0] cycle;

    initial begin
        fd = $fopen(FILE, "w");
        cycle = 0;
    end

    always @(posedge clk) begin
        if (rst)
            cycle <= 0;
        else
            cycle <= cycle + 1;
        if (enable && tvalid && tready) begin
            $fwrite(fd, "%0d %0d %h %h\n", cycle, tlast, tkeep, tdata);
            if (tlast)
                $fflush(fd);
        end
    end
endmodule
