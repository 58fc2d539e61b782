"""Raw NBD for the e2e tests: what no client does on purpose (pipelining
without reading replies, one request over a whole volume). Imported by the
tests' python heredocs with PYTHONPATH set to tests/e2e."""
import socket
import struct

REQUEST_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698
CMD_READ = 0
CMD_WRITE_ZEROES = 6


def go(path, name):
    """A connection to the unix socket path, through the fixed newstyle
    handshake to NBD_OPT_GO on export name: the socket, in transmission."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.recv(18, socket.MSG_WAITALL)  # the greeting
    s.sendall(struct.pack('>I', 3))  # fixed newstyle, no zeroes
    name = name.encode()
    s.sendall(b'IHAVEOPT' + struct.pack('>II', 7, 4 + len(name) + 2) +
              struct.pack('>I', len(name)) + name + b'\0\0')
    while True:  # option replies until NBD_REP_ACK
        head = s.recv(20, socket.MSG_WAITALL)
        length = struct.unpack('>I', head[16:20])[0]
        if length:
            s.recv(length, socket.MSG_WAITALL)
        if struct.unpack('>I', head[12:16])[0] == 1:
            return s


def request(s, cmd, cookie, offset, length):
    s.sendall(struct.pack('>IHHQQI', REQUEST_MAGIC, 0, cmd, cookie, offset, length))


def simple_reply(s):
    """(magic, error, cookie) of the next simple reply."""
    return struct.unpack('>IIQ', s.recv(16, socket.MSG_WAITALL))
