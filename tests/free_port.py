#!/usr/bin/env python3
"""Print a TCP port on 127.0.0.1 that is free now, for a test node to listen on.

The port is taken outside the kernel's ephemeral range: a port from bind(0)
lies inside it, and while a node is down between kill and restart (or not yet
up), any outgoing connection on the machine, a concurrent test's among them,
may take it, and the node's listen then fails with "address in use"."""
import random
import socket

with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    low, high = (int(n) for n in f.read().split())
ephemeral = range(low, high + 1)
candidates = [p for p in range(10000, 65536) if p not in ephemeral]
if not candidates:
    raise SystemExit("free_port.py: the ephemeral range %s covers 10000-65535" % ephemeral)
for port in random.sample(candidates, min(200, len(candidates))):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port.py: no free port outside the ephemeral range after 200 tries")
