"""A stray byte from a host's shell cannot end a run (testbed/emulation/network.py)."""
from testbed.emulation.network import _tracked


class Shell:
    def __init__(self):
        self.decoder = None
        self.pid = 42
        self.startShell()

    def startShell(self):
        self.seen = self.decoder.decode(b"ok \xeb\x80 then ") + self.decoder.decode(b"\xc3")


def test_hosts_output_that_is_not_utf8_is_read_with_replacement_characters():
    node = _tracked(Shell, None)()
    assert node.seen == "ok \ufffd then "         # 0xeb 0x80: a truncated sequence
    assert node.decoder.decode(b"\xa9 more", final=True) == "\u00e9 more"   # split, joined
