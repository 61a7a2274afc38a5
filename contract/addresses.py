"""The addresses of a simulated cluster (its NICs, its switch, a tree's leaf switches) and the integers
that address registers hold (``LOCAL_MAC_LO``/``_HI``, ``LOCAL_IP``, the peer table, ``SWITCH_MAC_*``).

The golden model builds its frames with these addresses and the RTL harness writes them to the NICs'
registers, so both sides name every node alike (``host_driver.sim.cluster``, ``host_driver.sim.cluster_run``).
"""

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.1.254"


def rank_mac(r: int) -> str:
    """NIC ``r``'s MAC address."""
    return f"02:00:00:00:01:{r:02x}"


def rank_ip(r: int) -> str:
    """NIC ``r``'s IPv4 address."""
    return f"10.0.1.{r + 1}"


def leaf_mac(k: int) -> str:
    """Leaf switch k's MAC in a simulated tree (the spine has SWITCH_MAC)."""
    return f"02:00:00:00:00:{0xf0 + k:02x}"


def leaf_ip(k: int) -> str:
    """Leaf switch k's IPv4 address in a simulated tree (the spine has SWITCH_IP)."""
    return f"10.0.1.{240 + k}"


def mac_int(mac: str) -> int:
    """"02:00:00:00:00:01" -> the 48-bit integer a cfg_mac register holds."""
    return int(mac.replace(":", ""), 16)


def ip_int(ip: str) -> int:
    """"10.0.0.1" -> the 32-bit integer a cfg_ip register holds."""
    return int.from_bytes(bytes(int(x) for x in ip.split(".")), "big")
