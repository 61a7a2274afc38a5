"""The ring's reliable links: the receiver's acks and nacks, the sender's retransmission buffer and credits
(contract/link.py, docs/collective_engine.md "Reliable links")."""
