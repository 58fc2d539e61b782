#!/usr/bin/env python3
"""What the shell tests do to a node that ftvmctl does not: bytes of their own
on its sockets, its frame pool overwritten, its page table read or changed
while it is down, systemd's notify socket played. Also the wire encoding
(CRC-32C, frames, protobuf fields) that tests/fuzz/make_corpus.py imports.

    poke.py send [--frame] PORT|SOCKET     stdin's bytes (framed) to
                                           127.0.0.1:PORT or a unix socket
    poke.py hold-write-pointer SOCKET GUID
                                           a bare client's write pointer to
                                           page 0, "holding" once granted,
                                           held until the process is killed
    poke.py clobber POOL [--frames-of FILE]
                                           0xa5 over the first MiB of a frame
                                           pool, or over every frame holding
                                           FILE's bytes (prints how many)
    poke.py sql DB STATEMENT [PARAM...]    one statement, committed; each row
                                           printed, values space-separated,
                                           NULL as nothing; a PARAM of digits
                                           is bound as an integer
    poke.py notify-listen SOCKET OUT       systemd's notify socket: each
                                           message's lines appended to OUT
                                           until STOPPING=1 or 30 s"""
import argparse
import signal
import socket
import sqlite3
import struct
import sys
import time

FRAME_SIZE = 4096


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    """A protobuf field: an int as a varint, bytes length-delimited."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    return varint(num << 3 | 2) + varint(len(value)) + value


def request(rid, num, body=b""):
    """A ClientRequest (proto/client.proto): its id and the one request in
    field num."""
    return field(1, rid) + field(num, body)


def frame(payload):
    """common/frame.h: magic, version, length, then the CRC-32C of those 8
    bytes and the payload."""
    hdr = b"FV\x01\x00" + struct.pack(">I", len(payload))
    return hdr + struct.pack(">I", crc32c(hdr + payload)) + payload


def connect(target):
    if target.isdigit():
        return socket.create_connection(("127.0.0.1", int(target)))
    s = socket.socket(socket.AF_UNIX)
    s.connect(target)
    return s


def send(args):
    data = sys.stdin.buffer.read()
    s = connect(args.target)
    s.sendall(frame(data) if args.frame else data)
    s.settimeout(2)
    try:
        s.recv(100)  # an answer, or the node closing on us
    except OSError:
        pass


def hold_write_pointer(args):
    # GetPointer (field 20 of ClientRequest): guid, page 0 (left out), write.
    get = field(1, args.guid.encode()) + field(3, 1)
    s = connect(args.socket)
    s.sendall(frame(request(1, 20, get)))
    s.recv(4096)
    print("holding", flush=True)
    signal.pause()


def clobber(args):
    with open(args.pool, "r+b") as f:
        if not args.frames_of:
            f.write(b"\xa5" * (1 << 20))
            return
        with open(args.frames_of, "rb") as w:
            want = w.read()
        pool = f.read()
        hit = 0
        at = pool.find(want)
        while at >= 0:
            if at % FRAME_SIZE == 0:
                f.seek(at)
                f.write(b"\xa5" * FRAME_SIZE)
                hit += 1
            at = pool.find(want, at + 1)
        print(hit)


def sql(args):
    params = [int(p) if p.isdigit() else p for p in args.params]
    db = sqlite3.connect(args.db)
    for row in db.execute(args.statement, params):
        print(" ".join("" if v is None else str(v) for v in row))
    db.commit()


def notify_listen(args):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(args.socket)
    s.settimeout(0.2)
    end = time.monotonic() + 30
    with open(args.out, "a", buffering=1) as out:
        while time.monotonic() < end:
            try:
                msg = s.recv(4096).decode()
            except socket.timeout:
                continue
            for line in msg.split("\n"):
                out.write(line + "\n")
            if "STOPPING=1" in msg:
                break


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("send")
    c.add_argument("--frame", action="store_true")
    c.add_argument("target")
    c.set_defaults(fn=send)
    c = sub.add_parser("hold-write-pointer")
    c.add_argument("socket")
    c.add_argument("guid")
    c.set_defaults(fn=hold_write_pointer)
    c = sub.add_parser("clobber")
    c.add_argument("pool")
    c.add_argument("--frames-of")
    c.set_defaults(fn=clobber)
    c = sub.add_parser("sql")
    c.add_argument("db")
    c.add_argument("statement")
    c.add_argument("params", nargs="*")
    c.set_defaults(fn=sql)
    c = sub.add_parser("notify-listen")
    c.add_argument("socket")
    c.add_argument("out")
    c.set_defaults(fn=notify_listen)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
