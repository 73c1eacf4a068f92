"""What every fabric check shares: the error it raises and the address plan's size."""
from __future__ import annotations

MAX_HOSTS = 254 * 256  # what the 10.<port>.<1..254>.<0..255> plan can address


class FabricError(ValueError):
    """A parameter or a wiring that cannot make a valid fabric; the message names it."""
