package preload

// The interposer's ABI: what the library and the daemon share besides
// internal/shmring's ring format. uet_abi.h is the C side; TestABIHeader
// compiles it and checks that every number here is the header's.
const (
	// ABIVersion is the interposer ABI's version, in UET_IOC_ID's answer
	// and UET_IOC_SHARE's request. Version 2: a share is a ring set of
	// the R rings UET_IOC_ID says, woken by an eventfd (version 1: one
	// ring, woken by a datagram socket).
	ABIVersion = 2

	// DataIno and StatusIno are the inode numbers the tree gives
	// user_events_data and user_events_status ("uetd", "uets"), fixed for
	// the life of the mount: the library recognises the tree's files by
	// them and the mount's st_dev.
	DataIno   = 0x75657464
	StatusIno = 0x75657473

	// VoidIndex is the write index of a record the library reserved and
	// gave up (its payload faulted, or the daemon must answer the write
	// through FUSE): the daemon skips it and counts it.
	VoidIndex = 0xfffffffe
)

// The validation table: a memfd the library creates, the daemon maps and
// writes, the library maps read-only. A header, then one slot per write
// index.
const (
	TableMagic   = 0x014c424154544555 // "UETTABL" 1, stored last
	TableVersion = 1
	TableHeader  = 64
	SlotSize     = 32
	SlotLocs     = 4
	TableSlots   = 1024 // the slots the library asks for

	// Header fields: magic u64 at 0, version u32 at 8, nslots u32 at 12,
	// slot size u32 at 16.
	TableOffMagic    = 0
	TableOffVersion  = 8
	TableOffNSlots   = 12
	TableOffSlotSize = 16

	// A slot: word u32 (ready, status, nloc, flags), min_size u32,
	// ring_max u32, type_id u16, reserved u16, loc u32 × SlotLocs.
	SlotOffWord    = 0
	SlotOffMinSize = 4
	SlotOffRingMax = 8
	SlotOffTypeID  = 12
	SlotOffLoc     = 16

	// WordReady is the slot word's ready bit; the status is bits 8-15,
	// the number of loc rules 16-23, the flags 24-31.
	WordReady = 1
	// SlotFUSE is a slot flag: writes of this index go through FUSE
	// while enabled (its event has more loc fields than a slot holds).
	SlotFUSE = 1
	// A loc rule: the field's offset in the record (8-byte header
	// included) in bits 0-15, LocRel for __rel_loc (else __data_loc),
	// LocChar for a char type, whose data must end in NUL.
	LocRel  = 1 << 16
	LocChar = 1 << 17
)

// SlotWord is a slot's first word: ready, with status, the number of loc
// rules and the flags.
func SlotWord(status, nloc, flags uint8) uint32 {
	return WordReady | uint32(status)<<8 | uint32(nloc)<<16 | uint32(flags)<<24
}

// The private ioctls on the tree's user_events_data (user_events_status for
// IocStatus), in the generic _IOC layout of amd64, the one architecture the
// library is built for. A kernel's user_events_data answers them ENOTTY.
const (
	// IocID is UET_IOC_ID, _IOR('*', 0x80, struct uet_id): out, the open
	// file's id, the ABI version and R, the rings of the set a share is.
	IocID = 0x80102a80
	// IocShare is UET_IOC_SHARE, _IOWR('*', 0x81, struct uet_share).
	IocShare = 0xc0282a81
	// IocWake is UET_IOC_WAKE, _IO('*', 0x82): the library lost its
	// wake socket and asks the daemon to look at its rings.
	IocWake = 0x2a82
	// IocFlush is UET_IOC_FLUSH, _IO('*', 0x83): drain the rings now
	// (the library has losses to tell and no room for them).
	IocFlush = 0x2a83
	// IocStatus is UET_IOC_STATUS, _IOW('*', 0x84, struct
	// uet_status_page), on user_events_status: the v10 ABI's status page.
	IocStatus = 0x40082a84

	IDSize     = 16 // struct uet_id: u64 file_id, u32 abi, u32 rings
	ShareSize  = 40 // struct uet_share (below)
	StatusSize = 8  // struct uet_status_page: u32 size, s32 page_fd
)

// struct uet_id's field rings, at IDOffRings.
const IDOffRings = 12

// struct uet_share's fields: u32 size, u32 abi, s32 set_fd (the ring set's
// memfd), s32 wake_fd (its eventfd), s32 table_fd, u32 flags, u64 file_id
// (in), u32 nslots (out), u32 reserved.
const (
	ShareOffSize    = 0
	ShareOffABI     = 4
	ShareOffSetFD   = 8
	ShareOffWakeFD  = 12
	ShareOffTableFD = 16
	ShareOffFlags   = 20
	ShareOffFileID  = 24
	ShareOffNSlots  = 32
)

// FileName is the library's file name, and its soname.
const FileName = "libuetrace-preload.so"
