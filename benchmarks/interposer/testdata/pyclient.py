#!/usr/bin/env python3
"""pyclient.py TRACEFS: user_events from Python as a script would use them,
with the standard library only: DIAG_IOCSREG through fcntl.ioctl, the
enable word in a ctypes buffer the kernel (or uetrace) writes, records
written with os.writev and os.write, from the main thread, another thread
and a forked child. It prints what each call returned (a count or an errno
name, never a pid or a time), so that two runs can be compared line for
line. The events py_fixed, py_loc and py_empty must be enabled before it
starts; py_off is never enabled.

The layouts are the kernel's (include/uapi/linux/user_events.h, 6.4+):
struct user_reg is packed, 28 bytes; DIAG_IOCSREG is _IOWR('*', 0,
struct user_reg *) and DIAG_IOCSUNREG _IOW('*', 2, struct user_unreg *),
whose size field is a pointer's, 8 bytes.
"""
import ctypes
import errno
import os
import struct
import sys
import threading

DIAG_IOCSREG = 0xC0082A00
DIAG_IOCSUNREG = 0x40082A02

tracefs = sys.argv[1] if len(sys.argv) > 1 else "/sys/kernel/tracing"
fd = os.open(os.path.join(tracefs, "user_events_data"), os.O_RDWR)
# The enable words live as long as the script: the kernel writes them.
words = []


def register(command):
    """Registers command and returns (write index, enable word)."""
    import fcntl

    word = ctypes.c_uint32(0)
    name = ctypes.create_string_buffer(command.encode())
    words.append((word, name))
    reg = bytearray(struct.pack("<IBBHQQI", 28, 0, 4, 0, ctypes.addressof(word), ctypes.addressof(name), 0))
    fcntl.ioctl(fd, DIAG_IOCSREG, reg, True)
    index = struct.unpack_from("<I", reg, 24)[0]
    print("register %s: enabled %d" % (command.split()[0], word.value & 1))
    return index, word


def unregister(word):
    import fcntl

    fcntl.ioctl(fd, DIAG_IOCSUNREG, bytearray(struct.pack("<IBBHQ", 16, 0, 0, 0, ctypes.addressof(word))), True)


def report(what, call):
    try:
        print("%s: %d" % (what, call()))
    except OSError as e:
        print("%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)))


def loc(offset, size):
    """A __data_loc/__rel_loc word: size << 16 | offset."""
    return struct.pack("<I", size << 16 | offset)


fixed, fixed_word = register("py_fixed u32 n; char[8] tag; s64 delta")
locs, _ = register("py_loc u32 n; __data_loc char[] d; __rel_loc char[] r")
empty, _ = register("py_empty")
off, _ = register("py_off u32 n")
idx = lambda i: struct.pack("<I", i)

# py_fixed, a field an iovec, as libtracepoint writes.
for n in range(1, 4):
    report("writev py_fixed %d" % n, lambda: os.writev(fd, [idx(fixed), struct.pack("<I", n), b"tag%05d" % n, struct.pack("<q", -n)]))

# py_loc in one buffer with write(2): n at 0, d's word at 4, r's at 8,
# d's string at 12, r's after it. A __data_loc offset counts from the
# record's start, the 8 bytes of common fields before the payload included
# (d is at 8 + 12, as its format file says); a __rel_loc's from the end of
# its own word (r is len(d) after it).
for n, (d, r) in enumerate([(b"data\0", b"rel\0"), (b"\0", b"x" * 100 + b"\0")], 1):
    payload = struct.pack("<I", n) + loc(8 + 12, len(d)) + loc(len(d), len(r)) + d + r
    report("write py_loc %d" % n, lambda: os.write(fd, idx(locs) + payload))
# ... and a string that runs past the record's end: the kernel's EFAULT.
report("write py_loc past the end", lambda: os.write(fd, idx(locs) + struct.pack("<I", 3) + loc(8 + 12, 50) + loc(0, 1) + b"ab\0"))
# ... and strings without their NUL: EFAULT too (the kernel's validator
# wants a char[] to end with one, VALIDATOR_ENSURE_NULL).
report("write py_loc no NUL", lambda: os.write(fd, idx(locs) + struct.pack("<I", 4) + loc(8 + 12, 3) + loc(3, 2) + b"abc" + b"de"))

# 1024 iovecs (UIO_MAXIOV), of a byte most: more than a FUSE request
# carries pages, which FUSE sends in pieces; Linux takes it as one record.
report("writev py_fixed 1024 iovecs", lambda: os.writev(fd, [idx(fixed), struct.pack("<I", 5), b"iovecs\0\0"] + [b"\x01"] * 1021))

# pwrite(2) at offset 0 is write(2); at any other, user_events' EFAULT;
# pwritev(2)'s offset is never looked at.
fixed_rec = lambda n, tag: [idx(fixed), struct.pack("<I", n), tag, struct.pack("<q", n)]
report("pwrite py_fixed", lambda: os.pwrite(fd, b"".join(fixed_rec(6, b"pwrite\0\0")), 0))
report("pwrite py_fixed at 8", lambda: os.pwrite(fd, b"".join(fixed_rec(7, b"pwrite\0\0")), 8))
report("pwritev py_fixed at 100", lambda: os.pwritev(fd, fixed_rec(8, b"pwritev\0"), 100))

# Records longer than the fields, past a trace buffer page (4 KiB), perf's
# 8 KiB and the interposer's 64 KiB: written (the count), and dropped
# where they do not fit, each drop counted (uetrace status).
for size in (4000, 9000, 70000):
    report("write py_fixed +%d" % size, lambda: os.write(fd, b"".join(fixed_rec(size, b"big\0\0\0\0\0")) + b"q" * size))
    report("writev py_fixed +%d in %d" % (size, size // 100), lambda: os.writev(fd, fixed_rec(size + 1, b"big\0\0\0\0\0") + [b"q" * 100] * (size // 100)))

report("writev py_empty", lambda: os.writev(fd, [idx(empty)]))
report("writev py_off (not enabled)", lambda: os.writev(fd, [idx(off), struct.pack("<I", 1)]))
report("writev bad index", lambda: os.writev(fd, [idx(0xFFFF), struct.pack("<I", 1)]))
report("write 2 bytes", lambda: os.write(fd, b"\x01\x00"))

# A thread's write and a forked child's: each in its own name.
t = threading.Thread(target=lambda: report("thread writev py_fixed", lambda: os.writev(fd, [idx(fixed), struct.pack("<I", 10), b"thread\0\0", struct.pack("<q", 10)])))
t.start()
t.join()
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    report("child writev py_fixed", lambda: os.writev(fd, [idx(fixed), struct.pack("<I", 20), b"child\0\0\0", struct.pack("<q", 20)]))
    sys.stdout.flush()
    os._exit(0)
os.waitpid(pid, 0)
report("writev py_fixed after the child", lambda: os.writev(fd, [idx(fixed), struct.pack("<I", 30), b"parent\0\0", struct.pack("<q", 30)]))

# Unregistering takes the enable word away, not the write index: the file
# keeps its reference to the event until it is closed.
unregister(fixed_word)
report("writev py_fixed unregistered", lambda: os.writev(fd, [idx(fixed), struct.pack("<I", 40), b"gone\0\0\0\0", struct.pack("<q", 40)]))
os.close(fd)
