"""The nft script and tc commands the docker backend's kernel faults are made of.

Where the rules act is what makes loss real: a receiver's input hook (the packets crossed
the wire, so the sender's TCP retransmits them; measured in tests/test_kernel_loss_netns_e2e.py)
and, for a delay, only the packets to the one receiver. These tests hold the text to that;
the namespace test applies it to a real kernel.
"""

from __future__ import annotations

from starling.orchestrator.execution.backends.netfault import RESET, delay_commands, receiver_rules


def test_receiver_rules_drop_reset_or_sample_on_the_input_hook():
    script = receiver_rules({"10.0.0.2": 100, "10.0.0.3": 30, "10.0.0.4": RESET})
    assert script.startswith("add table inet starling_faults\ndelete table inet starling_faults\n")
    assert "type filter hook input priority 0; policy accept;" in script
    assert "hook output" not in script
    assert "ip saddr 10.0.0.2 tcp dport 50051 drop" in script
    assert "ip saddr 10.0.0.3 tcp dport 50051 numgen random mod 100 < 30 drop" in script
    assert "ip saddr 10.0.0.4 tcp dport 50051 reject with tcp reset" in script
    # Restored: the table is replaced by an empty one, in the same transaction.
    empty = receiver_rules({})
    assert "drop" not in empty and "reject" not in empty and "hook input" in empty


def test_delay_commands_delay_only_the_packets_to_each_receiver():
    commands = delay_commands({"10.0.0.2": (50.0, 10.0), "10.0.0.3": (20.0, 0.0)})
    assert commands[0] == ["qdisc", "del", "dev", "eth0", "root"]
    assert commands[1][-4:] == ["1:", "htb", "default", "1"]  # unmatched traffic: class 1:1
    netems = [c for c in commands if "netem" in c]
    assert [c[c.index("netem") :] for c in netems] == [
        ["netem", "delay", "50ms", "10ms", "distribution", "normal"],
        ["netem", "delay", "20ms"],
    ]
    filters = [c for c in commands if c[0] == "filter"]
    assert [c[c.index("dst") + 1] for c in filters] == ["10.0.0.2/32", "10.0.0.3/32"]
    # Each filter sends its receiver's packets to the class holding that receiver's netem.
    for netem, rule in zip(netems, filters, strict=True):
        assert netem[netem.index("parent") + 1] == rule[rule.index("flowid") + 1]
    assert delay_commands({}) == [["qdisc", "del", "dev", "eth0", "root"]]
