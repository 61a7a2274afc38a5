// ainic stage trace (simulation only): records a NIC's `dbg_stages` port (contract/stages.py), run-length
// encoded, while `enable` is high, so that the host side can say where a collective's cycles went.
//
// * One line "<cycle> <value hex>" in the cycle `enable` rises and in every cycle the value differs from the
//   cycle before; one line "<cycle> end" in the first cycle `enable` is low again (then the file is flushed).
//   A value holds from its line's cycle up to the next line's. <cycle> counts clock cycles since reset.
// * The file is opened at time 0 (FILE, relative to the simulator's working directory).
// * Costs a comparison per cycle while `enable` is low (no file I/O).
`timescale 1ns/1ps
module ainic_stage_trace #(
    parameter WIDTH = 40,
    parameter FILE = "stages.txt"
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             enable,
    input  wire [WIDTH-1:0] value
);
    integer fd;
    reg [63:0] cycle;
    reg [WIDTH-1:0] last;
    reg was;

    initial begin
        fd = $fopen(FILE, "w");
        cycle = 0;
        last = 0;
        was = 0;
    end

    always @(posedge clk) begin
        if (rst)
            cycle <= 0;
        else
            cycle <= cycle + 1;
        if (enable && (!was || value != last))
            $fwrite(fd, "%0d %h\n", cycle, value);
        if (!enable && was) begin
            $fwrite(fd, "%0d end\n", cycle);
            $fflush(fd);
        end
        was <= enable;
        last <= value;
    end
endmodule
