// ainic host memory model (simulation only): an AXI4 slave memory with a bulk backdoor, latency,
// bandwidth throttling, random stalls, injected error responses and protocol checks.
//
// * Size: 2**ADDR_BITS bytes, DATA_WIDTH-bit words. Accesses at or above 2**ADDR_BITS answer DECERR;
//   accesses inside [cfg_err_lo, cfg_err_hi) answer cfg_err_resp (when it is non-zero). Reads of an
//   erroring beat return 0; writes of an erroring beat change nothing.
// * Latency: a burst's first R beat leaves no earlier than cfg_latency cycles after its AR was accepted;
//   bursts queue (up to 16 outstanding per direction), so latency overlaps like a pipelined memory.
//   A write's B response leaves cfg_latency cycles after its last W beat (at least 1).
// * Bandwidth: cfg_rate bytes per cycle in 8.8 fixed point in each direction (0 = unlimited; reads and
//   writes have a token bucket each, as on a full-duplex PCIe link); a beat moves when its bucket holds
//   DATA_WIDTH/8 bytes. 102.4 Gb/s at 250 MHz = 51.2 B/cycle
//   = cfg_rate 13107.
// * Random stalls: each cycle each of AR, R, AW, W, B stalls with probability cfg_stall/256 (xorshift32
//   seeded by cfg_seed). A valid R or B is never withdrawn (AXI rule).
// * Backdoor: a cycle with bd_load high reads LOAD_FILE, raw bytes, into the words from bd_lo on with
//   $fread (each word's bytes most significant first, as $fread fills a memory); a cycle with bd_dump high
//   writes words bd_lo..bd_hi (word indices) to DUMP_FILE, raw bytes in address order ($fwrite's "%u":
//   each word's 32-bit pieces least significant first, each little-endian, on Verilator and Icarus alike).
//   Paths are relative to the simulator's working directory. (Binary files: $readmemh parsed 4 MB at about
//   10 MB/s on Verilator, and $writememh's printf of every 32 bits and its parsing cost a 4-node demo 0.4 s.)
// * Resets: rst resets everything but the contents; bus_rst resets the AXI port alone (bursts in flight
//   are forgotten; contents, statistics and the cycle count stay), the AXI reset that goes with resetting
//   the master alone (AXI has one ARESETn per interface: master and slave leave reset together).
// * Checks: a burst that crosses a 4 KiB boundary, a size other than the bus width, a burst type other
//   than INCR, or a WLAST on the wrong beat increments stat_violations and prints a message.
`timescale 1ns/1ps
module ainic_host_memory #(
    parameter DATA_WIDTH = 512,
    parameter ADDR_BITS = 24,
    parameter LOAD_FILE = "hostmem_load.bin",
    parameter DUMP_FILE = "hostmem_dump.bin"
) (
    input  wire                    clk,
    input  wire                    rst,
    input  wire                    bus_rst,
    // AXI4 slave
    input  wire [63:0]             s_axi_awaddr,
    input  wire [7:0]              s_axi_awlen,
    input  wire [2:0]              s_axi_awsize,
    input  wire [1:0]              s_axi_awburst,
    input  wire                    s_axi_awvalid,
    output wire                    s_axi_awready,
    input  wire [DATA_WIDTH-1:0]   s_axi_wdata,
    input  wire [DATA_WIDTH/8-1:0] s_axi_wstrb,
    input  wire                    s_axi_wlast,
    input  wire                    s_axi_wvalid,
    output wire                    s_axi_wready,
    output reg  [1:0]              s_axi_bresp,
    output reg                     s_axi_bvalid,
    input  wire                    s_axi_bready,
    input  wire [63:0]             s_axi_araddr,
    input  wire [7:0]              s_axi_arlen,
    input  wire [2:0]              s_axi_arsize,
    input  wire [1:0]              s_axi_arburst,
    input  wire                    s_axi_arvalid,
    output wire                    s_axi_arready,
    output reg  [DATA_WIDTH-1:0]   s_axi_rdata,
    output reg  [1:0]              s_axi_rresp,
    output reg                     s_axi_rlast,
    output reg                     s_axi_rvalid,
    input  wire                    s_axi_rready,
    // model configuration
    input  wire [15:0]             cfg_latency,
    input  wire [15:0]             cfg_rate,
    input  wire [7:0]              cfg_stall,
    input  wire [31:0]             cfg_seed,
    input  wire [63:0]             cfg_err_lo,
    input  wire [63:0]             cfg_err_hi,
    input  wire [1:0]              cfg_err_resp,
    // backdoor
    input  wire                    bd_load,
    input  wire                    bd_dump,
    input  wire [31:0]             bd_lo,
    input  wire [31:0]             bd_hi,
    // statistics (cycle stamps count from reset)
    output reg  [63:0]             stat_cycle,
    output reg  [31:0]             stat_rd_beats,
    output reg  [31:0]             stat_wr_beats,
    output reg  [63:0]             stat_rd_first,
    output reg  [63:0]             stat_rd_last,
    output reg  [63:0]             stat_wr_first,
    output reg  [63:0]             stat_wr_last,
    output reg  [31:0]             stat_violations
);
    localparam BYTES = DATA_WIDTH / 8;
    localparam SHIFT = $clog2(BYTES);
    localparam WORDS = (1 << ADDR_BITS) / BYTES;
    localparam QD = 16;

    reg [DATA_WIDTH-1:0] mem [0:WORDS-1];
    integer k;
    initial for (k = 0; k < WORDS; k = k + 1) mem[k] = {DATA_WIDTH{1'b0}};

    integer bd_fd, bd_n, bd_k;
    always @(posedge clk) begin
        if (bd_load) begin
            bd_fd = $fopen(LOAD_FILE, "rb");
            if (bd_fd == 0) begin
                $display("ainic_host_memory: cannot open %s", LOAD_FILE);
            end else begin
                bd_n = $fread(mem, bd_fd, bd_lo);
                $fclose(bd_fd);
            end
        end
        if (bd_dump) begin
            bd_fd = $fopen(DUMP_FILE, "wb");
            if (bd_fd == 0) begin
                $display("ainic_host_memory: cannot open %s", DUMP_FILE);
            end else begin
                for (bd_k = bd_lo; bd_k <= bd_hi; bd_k = bd_k + 1) $fwrite(bd_fd, "%u", mem[bd_k]);
                $fclose(bd_fd);
            end
        end
    end

    // -- random stalls ---------------------------------------------------------------------------------
    reg [31:0] lfsr;
    wire [31:0] x1 = lfsr ^ (lfsr << 13);
    wire [31:0] x2 = x1 ^ (x1 >> 17);
    wire [31:0] x3 = x2 ^ (x2 << 5);
    wire stall_ar = cfg_stall != 0 && x3[7:0]   < cfg_stall;
    wire stall_r  = cfg_stall != 0 && x3[15:8]  < cfg_stall;
    wire stall_aw = cfg_stall != 0 && x3[23:16] < cfg_stall;
    wire stall_w  = cfg_stall != 0 && x3[31:24] < cfg_stall;
    wire stall_b  = cfg_stall != 0 && (x3[7:0] ^ x3[31:24]) < cfg_stall;

    // -- bandwidth: a token bucket (8.8 fixed point bytes) per direction -----------------------------------
    reg [31:0] rtokens, wtokens;
    wire [31:0] beat_cost = BYTES << 8;
    wire r_tok = cfg_rate == 0 || rtokens >= beat_cost;
    wire w_tok = cfg_rate == 0 || wtokens >= beat_cost;
    wire r_fire, w_fire;
    function [31:0] refill(input [31:0] tokens, input take);
        reg [31:0] left;
        begin
            left = tokens - (take ? beat_cost : 32'd0) + cfg_rate;
            refill = cfg_rate == 0 ? 32'd0 : (left > 2 * beat_cost ? 2 * beat_cost : left);
        end
    endfunction

    // -- error decode -------------------------------------------------------------------------------------
    function [1:0] resp_of(input [63:0] addr);
        begin
            if ((addr >> ADDR_BITS) != 0) resp_of = 2'b11;                    // DECERR
            else if (cfg_err_resp != 0 && addr >= cfg_err_lo && addr < cfg_err_hi) resp_of = cfg_err_resp;
            else resp_of = 2'b00;
        end
    endfunction

    function crosses_4k(input [63:0] addr, input [7:0] len);
        begin
            crosses_4k = ((addr & 64'hFFF) + ((len + 1) << SHIFT)) > 4096;
        end
    endfunction

    // -- read path ----------------------------------------------------------------------------------------
    reg [63:0] arq_addr [0:QD-1];
    reg [7:0]  arq_len  [0:QD-1];
    reg [63:0] arq_time [0:QD-1];
    reg [4:0]  arq_wp, arq_rp;
    wire arq_full = (arq_wp - arq_rp) == QD;
    wire arq_empty = arq_wp == arq_rp;
    assign s_axi_arready = !rst && !bus_rst && !arq_full && !stall_ar;

    reg        rd_busy;
    reg [63:0] rd_addr;
    reg [7:0]  rd_left;
    wire rd_start_ok = !arq_empty && stat_cycle >= arq_time[arq_rp[3:0]] + cfg_latency;
    wire r_can = (!s_axi_rvalid || s_axi_rready) && !stall_r && r_tok;
    assign r_fire = r_can && (rd_busy || rd_start_ok);

    // -- write path ---------------------------------------------------------------------------------------
    reg [63:0] awq_addr [0:QD-1];
    reg [7:0]  awq_len  [0:QD-1];
    reg [4:0]  awq_wp, awq_rp;
    wire awq_full = (awq_wp - awq_rp) == QD;
    wire awq_empty = awq_wp == awq_rp;
    assign s_axi_awready = !rst && !bus_rst && !awq_full && !stall_aw;

    reg        wr_busy;
    reg [63:0] wr_addr;
    reg [7:0]  wr_left;
    reg [1:0]  wr_resp;
    reg [1:0]  bq_resp [0:QD-1];
    reg [63:0] bq_time [0:QD-1];
    reg [4:0]  bq_wp, bq_rp;
    wire bq_full = (bq_wp - bq_rp) == QD;
    assign s_axi_wready = !rst && !bus_rst && (wr_busy || !awq_empty) && !bq_full && !stall_w && w_tok;
    assign w_fire = s_axi_wvalid && s_axi_wready;

    wire [63:0] w_addr_now = wr_busy ? wr_addr : awq_addr[awq_rp[3:0]];
    wire [7:0]  w_left_now = wr_busy ? wr_left : awq_len[awq_rp[3:0]];
    wire [1:0]  w_resp_now = resp_of(w_addr_now);
    wire [ADDR_BITS-SHIFT-1:0] w_index = w_addr_now[ADDR_BITS-1:SHIFT];

    integer i;
    reg [63:0] r_addr_now;
    reg [7:0]  r_left_now;
    reg [1:0]  r_resp_now;
    reg [DATA_WIDTH-1:0] merged;

    always @(posedge clk) begin
        if (rst || bus_rst) begin
            lfsr <= cfg_seed == 0 ? 32'h1234_5678 : cfg_seed;
            rtokens <= 0; wtokens <= 0;
            arq_wp <= 0; arq_rp <= 0; awq_wp <= 0; awq_rp <= 0; bq_wp <= 0; bq_rp <= 0;
            rd_busy <= 0; wr_busy <= 0; wr_resp <= 0;
            s_axi_rvalid <= 0; s_axi_rlast <= 0; s_axi_rresp <= 0; s_axi_rdata <= 0;
            s_axi_bvalid <= 0; s_axi_bresp <= 0;
            if (rst) begin
                stat_cycle <= 0; stat_rd_beats <= 0; stat_wr_beats <= 0; stat_violations <= 0;
                stat_rd_first <= 0; stat_rd_last <= 0; stat_wr_first <= 0; stat_wr_last <= 0;
            end else
                stat_cycle <= stat_cycle + 1;
        end else begin
            lfsr <= x3;
            stat_cycle <= stat_cycle + 1;
            rtokens <= refill(rtokens, r_fire);
            wtokens <= refill(wtokens, w_fire);

            // AR accept
            if (s_axi_arvalid && s_axi_arready) begin
                arq_addr[arq_wp[3:0]] <= s_axi_araddr;
                arq_len[arq_wp[3:0]] <= s_axi_arlen;
                arq_time[arq_wp[3:0]] <= stat_cycle;
                arq_wp <= arq_wp + 1;
                if (crosses_4k(s_axi_araddr, s_axi_arlen) || s_axi_arsize != SHIFT || s_axi_arburst != 2'b01
                        || (s_axi_araddr & (BYTES - 1)) != 0) begin
                    stat_violations <= stat_violations + 1;
                    $display("ainic_host_memory: AXI violation on AR addr=%h len=%0d size=%0d burst=%0d",
                             s_axi_araddr, s_axi_arlen, s_axi_arsize, s_axi_arburst);
                end
            end
            // R
            if (s_axi_rvalid && s_axi_rready) s_axi_rvalid <= 0;
            if (r_fire) begin
                r_addr_now = rd_busy ? rd_addr : arq_addr[arq_rp[3:0]];
                r_left_now = rd_busy ? rd_left : arq_len[arq_rp[3:0]];
                r_resp_now = resp_of(r_addr_now);
                s_axi_rvalid <= 1;
                s_axi_rresp <= r_resp_now;
                s_axi_rdata <= r_resp_now == 0 ? mem[r_addr_now[ADDR_BITS-1:SHIFT]] : {DATA_WIDTH{1'b0}};
                s_axi_rlast <= r_left_now == 0;
                rd_addr <= r_addr_now + BYTES;
                rd_left <= r_left_now - 1;
                rd_busy <= r_left_now != 0;
                if (!rd_busy) arq_rp <= arq_rp + 1;
                if (stat_rd_beats == 0) stat_rd_first <= stat_cycle;
                stat_rd_last <= stat_cycle;
                stat_rd_beats <= stat_rd_beats + 1;
            end

            // AW accept
            if (s_axi_awvalid && s_axi_awready) begin
                awq_addr[awq_wp[3:0]] <= s_axi_awaddr;
                awq_len[awq_wp[3:0]] <= s_axi_awlen;
                awq_wp <= awq_wp + 1;
                if (crosses_4k(s_axi_awaddr, s_axi_awlen) || s_axi_awsize != SHIFT || s_axi_awburst != 2'b01
                        || (s_axi_awaddr & (BYTES - 1)) != 0) begin
                    stat_violations <= stat_violations + 1;
                    $display("ainic_host_memory: AXI violation on AW addr=%h len=%0d size=%0d burst=%0d",
                             s_axi_awaddr, s_axi_awlen, s_axi_awsize, s_axi_awburst);
                end
            end
            // W
            if (w_fire) begin
                if (w_resp_now == 0) begin
                    merged = mem[w_index];
                    for (i = 0; i < BYTES; i = i + 1)
                        if (s_axi_wstrb[i]) merged[8*i +: 8] = s_axi_wdata[8*i +: 8];
                    mem[w_index] <= merged;
                end
                if (s_axi_wlast != (w_left_now == 0)) begin
                    stat_violations <= stat_violations + 1;
                    $display("ainic_host_memory: AXI violation: WLAST=%0d with %0d beats left", s_axi_wlast, w_left_now);
                end
                wr_addr <= w_addr_now + BYTES;
                wr_left <= w_left_now - 1;
                wr_busy <= w_left_now != 0;
                if (!wr_busy) awq_rp <= awq_rp + 1;
                if (w_left_now == 0) begin
                    bq_resp[bq_wp[3:0]] <= (wr_busy && wr_resp > w_resp_now) ? wr_resp : w_resp_now;
                    bq_time[bq_wp[3:0]] <= stat_cycle;
                    bq_wp <= bq_wp + 1;
                    wr_resp <= 0;
                end else begin
                    wr_resp <= (wr_busy && wr_resp > w_resp_now) ? wr_resp : w_resp_now;
                end
                if (stat_wr_beats == 0) stat_wr_first <= stat_cycle;
                stat_wr_last <= stat_cycle;
                stat_wr_beats <= stat_wr_beats + 1;
            end
            // B
            if (s_axi_bvalid && s_axi_bready) s_axi_bvalid <= 0;
            if ((!s_axi_bvalid || s_axi_bready) && !stall_b && bq_wp != bq_rp
                    && stat_cycle >= bq_time[bq_rp[3:0]] + (cfg_latency == 0 ? 1 : cfg_latency)) begin
                s_axi_bvalid <= 1;
                s_axi_bresp <= bq_resp[bq_rp[3:0]];
                bq_rp <= bq_rp + 1;
            end
        end
    end
endmodule
