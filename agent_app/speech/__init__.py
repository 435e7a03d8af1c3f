"""Clients of the speech container's session protocol, one interface over two transports."""
