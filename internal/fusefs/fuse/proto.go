package fuse

import (
	"encoding/binary"
	"errors"
)

// The wire protocol, from include/uapi/linux/fuse.h (7.28 and later). Only
// what this server reads or writes is here.

const (
	kernelMajor = 7
	ourMinor    = 38 // the structures below are 7.38's
	minMinor    = 28 // FUSE_MAX_PAGES came in 7.28

	rootID = 1

	inHeaderSize  = 40
	outHeaderSize = 16
	attrSize      = 88
	entryOutSize  = 40 + attrSize
	attrOutSize   = 16 + attrSize
	initOutSize   = 64
	openOutSize   = 16
	writeOutSize  = 8
	statfsOutSize = 80
	ioctlOutSize  = 16
	pollOutSize   = 8
	direntSize    = 24 // without the name

)

// Opcodes.
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opSetattr     = 4
	opReadlink    = 5
	opSymlink     = 6
	opMknod       = 8
	opMkdir       = 9
	opUnlink      = 10
	opRmdir       = 11
	opRename      = 12
	opLink        = 13
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatfs      = 17
	opRelease     = 18
	opFsync       = 20
	opSetxattr    = 21
	opGetxattr    = 22
	opListxattr   = 23
	opRemovexattr = 24
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReaddir     = 28
	opReleasedir  = 29
	opFsyncdir    = 30
	opGetlk       = 31
	opSetlk       = 32
	opSetlkw      = 33
	opAccess      = 34
	opCreate      = 35
	opInterrupt   = 36
	opBmap        = 37
	opDestroy     = 38
	opIoctl       = 39
	opPoll        = 40
	opNotifyReply = 41
	opBatchForget = 42
	opFallocate   = 43
	opReaddirplus = 44
	opRename2     = 45
	opLseek       = 46
	opCopyRange   = 47
)

// INIT flags.
const (
	initAsyncRead     = 1 << 0
	initAtomicOTrunc  = 1 << 3
	initBigWrites     = 1 << 5
	initWritebackCach = 1 << 16
	initMaxPages      = 1 << 22
	initInitExt       = 1 << 30 // flags2 is there

	// flags2 (bits 32..63 of the 64-bit flags)
	init2Passthrough = 1 << (37 - 32)
)

// Other flags.
const (
	fopenDirectIO    = 1 << 0
	fopenNonseekable = 1 << 2
	fopenStream      = 1 << 4
	fopenNoflush     = 1 << 5
	fopenPassthrough = 1 << 7

	ioctlUnrestricted = 1 << 1

	pollScheduleNotify = 1 << 0

	notifyPoll = 1

	fattrMode = 1 << 0
	fattrUID  = 1 << 1
	fattrGID  = 1 << 2
	fattrSize = 1 << 3
)

// errBadHeader: the message cannot be answered (no usable header); it is
// dropped. errMalformed: the header is good but the body is not what the
// opcode needs; it is answered EIO.
var (
	errBadHeader = errors.New("fuse: malformed request header")
	errMalformed = errors.New("fuse: malformed request body")
)

// forgetOne is one node of a BATCH_FORGET.
type forgetOne struct{ node, nlookup uint64 }

// message is one decoded request. Fields an opcode does not have are zero.
// Slices (name aside) point into the buffer the message was read into.
type message struct {
	op       uint32
	unique   uint64
	node     uint64
	uid, gid uint32
	pid      uint32

	name string // LOOKUP, GETXATTR

	fh      uint64
	offset  uint64
	size    uint32 // READ/READDIR size, GETXATTR size, SETATTR: see setSize
	flags   uint32 // OPEN/OPENDIR/READ/WRITE file flags, IOCTL flags, POLL flags, RELEASE flags
	data    []byte // WRITE data, IOCTL input
	nlookup uint64 // FORGET
	forgets []forgetOne

	// SETATTR
	valid   uint32
	setSize uint64

	// IOCTL
	cmd             uint32
	arg             uint64
	inSize, outSize uint32

	// POLL
	kh     uint64
	events uint32

	// INTERRUPT
	target uint64

	// INIT
	major, minor, maxReadahead, initFlags, initFlags2 uint32
}

var le = binary.LittleEndian

// decode parses one request as read from /dev/fuse. It never panics: a
// message too short for its header, or whose length field disagrees with
// what was read, is errBadHeader; a body too short for its opcode is
// errMalformed (with the header fields filled, so it can be answered).
func decode(b []byte) (message, error) {
	var m message
	if len(b) < inHeaderSize {
		return m, errBadHeader
	}
	if n := le.Uint32(b[0:]); int64(n) != int64(len(b)) {
		return m, errBadHeader
	}
	m.op = le.Uint32(b[4:])
	m.unique = le.Uint64(b[8:])
	m.node = le.Uint64(b[16:])
	m.uid = le.Uint32(b[24:])
	m.gid = le.Uint32(b[28:])
	m.pid = le.Uint32(b[32:])
	extlen := int(le.Uint16(b[36:])) * 8
	body := b[inHeaderSize:]
	if extlen > len(body) {
		return m, errMalformed
	}
	// Extensions (security contexts, supplementary groups) follow the
	// arguments; we negotiate none, but step over any.
	body = body[:len(body)-extlen]

	need := func(n int) bool { return len(body) >= n }
	switch m.op {
	case opLookup:
		s, ok := cString(body)
		if !ok {
			return m, errMalformed
		}
		m.name = s
	case opForget:
		if !need(8) {
			return m, errMalformed
		}
		m.nlookup = le.Uint64(body)
	case opBatchForget:
		if !need(8) {
			return m, errMalformed
		}
		count := le.Uint32(body)
		rest := body[8:]
		if uint64(count)*16 > uint64(len(rest)) {
			return m, errMalformed
		}
		m.forgets = make([]forgetOne, count)
		for i := range m.forgets {
			m.forgets[i] = forgetOne{le.Uint64(rest[i*16:]), le.Uint64(rest[i*16+8:])}
		}
	case opGetattr:
		if !need(16) {
			return m, errMalformed
		}
		m.flags = le.Uint32(body)
		m.fh = le.Uint64(body[8:])
	case opSetattr:
		if !need(88) {
			return m, errMalformed
		}
		m.valid = le.Uint32(body)
		m.fh = le.Uint64(body[8:])
		m.setSize = le.Uint64(body[16:])
	case opOpen, opOpendir:
		if !need(8) {
			return m, errMalformed
		}
		m.flags = le.Uint32(body)
	case opRead, opReaddir:
		if !need(40) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
		m.offset = le.Uint64(body[8:])
		m.size = le.Uint32(body[16:])
		m.flags = le.Uint32(body[32:])
	case opWrite:
		if !need(40) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
		m.offset = le.Uint64(body[8:])
		m.size = le.Uint32(body[16:])
		m.flags = le.Uint32(body[32:])
		if uint64(m.size) != uint64(len(body)-40) {
			return m, errMalformed
		}
		m.data = body[40:]
	case opRelease, opReleasedir:
		if !need(24) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
		m.flags = le.Uint32(body[8:])
	case opFlush:
		if !need(24) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
	case opGetxattr:
		if !need(8) {
			return m, errMalformed
		}
		m.size = le.Uint32(body)
		s, ok := cString(body[8:])
		if !ok {
			return m, errMalformed
		}
		m.name = s
	case opListxattr:
		if !need(8) {
			return m, errMalformed
		}
		m.size = le.Uint32(body)
	case opAccess:
		if !need(8) {
			return m, errMalformed
		}
		m.flags = le.Uint32(body)
	case opInit:
		if !need(16) {
			return m, errMalformed
		}
		m.major = le.Uint32(body)
		m.minor = le.Uint32(body[4:])
		m.maxReadahead = le.Uint32(body[8:])
		m.initFlags = le.Uint32(body[12:])
		if need(20) {
			m.initFlags2 = le.Uint32(body[16:])
		}
	case opInterrupt:
		if !need(8) {
			return m, errMalformed
		}
		m.target = le.Uint64(body)
	case opIoctl:
		if !need(32) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
		m.flags = le.Uint32(body[8:])
		m.cmd = le.Uint32(body[12:])
		m.arg = le.Uint64(body[16:])
		m.inSize = le.Uint32(body[24:])
		m.outSize = le.Uint32(body[28:])
		if uint64(m.inSize) != uint64(len(body)-32) {
			return m, errMalformed
		}
		m.data = body[32:]
	case opPoll:
		if !need(24) {
			return m, errMalformed
		}
		m.fh = le.Uint64(body)
		m.kh = le.Uint64(body[8:])
		m.flags = le.Uint32(body[16:])
		m.events = le.Uint32(body[20:])
	}
	return m, nil
}

// cString is the NUL-terminated string at the start of b.
func cString(b []byte) (string, bool) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), true
		}
	}
	return "", false
}

// putAttr writes struct fuse_attr of node ino: its st_ino unless a.Ino is set.
func putAttr(b []byte, ino uint64, a Attr) {
	sec, nsec := uint64(0), uint32(0)
	if !a.Mtime.IsZero() {
		sec, nsec = uint64(a.Mtime.Unix()), uint32(a.Mtime.Nanosecond())
	}
	nlink := a.Nlink
	if nlink == 0 {
		nlink = 1
		if a.Mode&sIFMT == sIFDIR {
			nlink = 2
		}
	}
	if a.Ino != 0 {
		ino = a.Ino
	}
	le.PutUint64(b[0:], ino)
	le.PutUint64(b[8:], a.Size)
	le.PutUint64(b[16:], (a.Size+511)/512)
	le.PutUint64(b[24:], sec) // atime
	le.PutUint64(b[32:], sec) // mtime
	le.PutUint64(b[40:], sec) // ctime
	le.PutUint32(b[48:], nsec)
	le.PutUint32(b[52:], nsec)
	le.PutUint32(b[56:], nsec)
	le.PutUint32(b[60:], a.Mode)
	le.PutUint32(b[64:], nlink)
	le.PutUint32(b[68:], a.Uid)
	le.PutUint32(b[72:], a.Gid)
	// rdev, blksize (0: the kernel's default), flags stay 0.
}

const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
)
