"""How a pass's process starts: forked from a server that imported torch once, a fresh
interpreter started early, or under torchrun; each trick with its measured gain."""
