# wrongns: the programs of TestHostileWrongNamespace (pidns_test.go), in the
# system's python3 (ctypes for mount, mmap and ioctl).
#
#   wrongns.py victim
#       holds a struct user_reg at VICTIM_ADDR — a registration of
#       victim_secret whose write_index is the sentinel 0xdeadbeef — says
#       "ready", and waits for its stdin to close.
#   wrongns.py mounter DIR VPID
#       pid 1 of a new pid and mount namespace: mounts its own /proc and a
#       FUSE connection on DIR, hands the device over on descriptor 3, waits
#       for "go", then forks until a child gets pid VPID of this namespace;
#       that child maps a zeroed page at VICTIM_ADDR and calls DIAG_IOCSREG
#       with it, and says "ioctl=R errno=E".
#   wrongns.py unprivileged DIR
#       as mounter, then, still pid 1, becomes uid and gid 65534 without
#       capabilities, writes "!u:root_persist u32 x" to DIR/dynamic_events, and
#       says "delete=0" or "delete=E".
import ctypes
import errno
import os
import socket
import sys

VICTIM_ADDR = 0x5A5A00000000
DIAG_IOCSREG = 0xC0082A00
PROT_RW = 3
MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED_NOREPLACE = 0x02, 0x20, 0x100000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 0x4000, 1 << 18

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]


def check(r, what):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def page():
    addr = libc.mmap(VICTIM_ADDR, 4096, PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
    if addr != VICTIM_ADDR:
        raise OSError(ctypes.get_errno(), "mmap")


def victim():
    page()
    name = b"victim_secret u32 x\0"
    ctypes.memmove(VICTIM_ADDR + 128, name, len(name))
    reg = (28).to_bytes(4, "little") + bytes([0, 4]) + (0).to_bytes(2, "little")
    reg += (VICTIM_ADDR + 64).to_bytes(8, "little") + (VICTIM_ADDR + 128).to_bytes(8, "little")
    reg += (0xDEADBEEF).to_bytes(4, "little")
    ctypes.memmove(VICTIM_ADDR, reg, len(reg))
    print("ready", flush=True)
    sys.stdin.read()


def mount(d):
    """Mounts FUSE on d, hands the device over and waits for "go"."""
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    check(libc.mount(b"proc", b"/proc", b"proc", 0, None), "mounting /proc")
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % fd
    check(libc.mount(b"uetrace", d.encode(), b"fuse.uetrace", MS_NOSUID | MS_NODEV, opts.encode()), "mounting FUSE")
    sock = socket.socket(fileno=3)
    socket.send_fds(sock, [b"fd"], [fd])
    if sock.recv(8) != b"go":
        sys.exit(1)


def unprivileged(d):
    mount(d)
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    try:
        with open(d + "/dynamic_events", "a") as f:
            f.write("!u:root_persist u32 x\n")
        print("delete=0", flush=True)
    except OSError as e:
        print("delete=%s" % errno.errorcode.get(e.errno, "?"), flush=True)


def mounter(d, vpid):
    mount(d)
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(vpid - 1))
        pid = os.fork()
        if pid == 0:
            if os.getpid() != vpid:
                os._exit(3)
            page()
            data = os.open(d + "/user_events_data", os.O_RDWR)
            r = libc.ioctl(data, DIAG_IOCSREG, VICTIM_ADDR)
            e = errno.errorcode.get(ctypes.get_errno(), "?") if r else "0"
            print("ioctl=%d errno=%s" % (r, e), flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(st) != 3:
            return
    print("never got pid %d" % vpid, flush=True)


if sys.argv[1] == "victim":
    victim()
elif sys.argv[1] == "unprivileged":
    unprivileged(sys.argv[2])
else:
    mounter(sys.argv[2], int(sys.argv[3]))
