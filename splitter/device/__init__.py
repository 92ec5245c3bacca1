"""What talks to the devices: the frame transport (serial, sockets), the host side of the
protocol, ``run`` (one inference over a chain) and the LO-SC weight server."""
