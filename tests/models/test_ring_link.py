"""The ring link's model (host_driver/models/ring_link.py) against the rules of contract/link.py: one link's
frames over faulty directions arrive once and in order; the counts say what went again and why."""

import pytest

from contract.credits import Credits
from host_driver.models.ring_link import ReceiverModel, SenderModel, simulate_link


def test_receiver_takes_only_the_next_psn_and_says_so():
    rx = ReceiverModel(64, Credits(rx_frames=16, rx_buffer_bytes=2048, ack_every=4))
    assert rx.receive(0) == ("accepted", None)
    verdict, nack = rx.receive(2)                       # 1 is missing: one nack for it
    assert verdict == "out_of_order" and nack["opcode"] == "nack" and nack["psn"] == 1
    assert rx.receive(3) == ("out_of_order", None)      # not twice for the same gap
    verdict, ack = rx.receive(0)                        # a copy: the sender missed an ack
    assert verdict == "duplicate" and ack["opcode"] == "ack" and ack["psn"] == 1
    for p in (1, 2, 3):
        rx.receive(p)
    assert rx.expect == 4 and rx.receive(4)[1]["psn"] == 5       # the 4th since the last ack: one is due
    assert rx.receive(4)[1]["count"] == 16 - 5          # nothing consumed: room = 16 - received
    assert rx.consume(8) is None and rx.unreported()


def test_sender_keeps_within_credit_and_goes_back_on_a_nack():
    cc = Credits(rx_frames=4, rx_buffer_bytes=4096, ack_every=2)
    tx = SenderModel(64, cc, timeout=100)
    for _ in range(4):
        tx.take(2)
    assert not tx.may_take(2)                           # the window of 4 frames
    with pytest.raises(ValueError, match="no credit"):
        tx.take(2)
    assert [tx.next_frame() for _ in range(5)] == [(0, False), (1, False), (2, False), (3, False), None]
    assert tx.on_ack({"opcode": "nack", "psn": 1, "count": 4, "offset": 10_000})
    assert tx.next_frame() == (1, True) and tx.retransmissions == 1 and tx.may_take(2)
    assert tx.on_ack({"opcode": "ack", "psn": 3, "count": 4, "offset": 10_000})       # skip 2: it has it
    assert tx.next_frame() == (3, True)


@pytest.mark.parametrize("faults", [{}, {"drop": 0.001, "seed": 2}, {"drop": 0.01, "seed": 3},
                                    {"drop": 0.05, "dup": 0.05, "corrupt": 0.05, "seed": 4}])
def test_simulated_link_delivers_every_frame_once_in_order(faults):
    run = simulate_link([17] * 1500, faults=faults)
    assert run.delivered == list(range(1500))
    if faults:
        assert run.retransmissions and run.dropped + run.corrupted
    else:
        assert run.retransmissions == run.timeouts == run.nacks == run.duplicates == 0
        assert run.acks >= 1500 // 8


def test_go_back_n_cost_at_the_goals_loss():
    """Go-back-N at W = 512, 80 Gb/s, 1 µs a hop: 0.1 % of frames lost costs a few per cent of the link's time
    (the goal: at least 0.9 of the loss-free efficiency), 1 % about a tenth."""
    base = simulate_link([17] * 4000).cycles
    at = {p: base / simulate_link([17] * 4000, faults={"drop": p, "seed": 7}).cycles for p in (0.001, 0.01)}
    assert at[0.001] > 0.95 and at[0.01] > 0.8, at
