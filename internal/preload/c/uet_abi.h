/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uet_abi.h — what libuetrace-preload.so and the daemon share besides
 * internal/shmring's ring format: how the library recognises the tree's
 * user_events_data, the validation table the daemon writes for a share,
 * and the private ioctls that set a share up. abi.go holds the same
 * numbers for Go, and TestABIHeader checks that they agree.
 *
 * None of this is the kernel's user_events ABI. A kernel's
 * user_events_data answers every ioctl below ENOTTY (user_events_ioctl's
 * default), so the library never takes a kernel's file for the tree's.
 * Integers are in the machine's byte order.
 */
#ifndef UET_ABI_H
#define UET_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <linux/ioctl.h>

/* The interposer ABI's version, in UET_IOC_ID's answer and UET_IOC_SHARE's
 * request. */
#define UET_ABI_VERSION 2

/* The tree gives user_events_data and user_events_status these inode
 * numbers ("uetd", "uets"), fixed for the life of the mount. */
#define UET_DATA_INO   0x75657464
#define UET_STATUS_INO 0x75657473

/* FUSE_SUPER_MAGIC: f_type of a FUSE file system (fstatfs). */
#define UET_FUSE_MAGIC 0x65735546

/* ---- internal/shmring's ring, version 1, in a set (set.go): R rings in
 * one memfd of P + R·(P+S) bytes, ring k's header page at P + k·(P+S) ---- */

#define UET_RING_MAGIC         0x01474e4952544555ULL /* "UETRING" 1 */
#define UET_RING_VERSION       1
#define UET_RING_OFF_MAGIC     0
#define UET_RING_OFF_VERSION   8
#define UET_RING_OFF_DATAOFF   12
#define UET_RING_OFF_SIZE      16
#define UET_RING_OFF_KEY       24
#define UET_RING_OFF_HEAD      64
#define UET_RING_OFF_TAIL      128
#define UET_RING_OFF_SLEEPING  192
#define UET_RING_OFF_DROPPED   256
#define UET_RING_OFF_DROPBYTES 264
#define UET_REC_HEADER         32
#define UET_REC_COMMITTED      0x80000000u
#define UET_PREFETCH_AHEAD     256
#define UET_MAX_RINGS          1024 /* shmring.MaxSetRings */

/* Write indexes a ring record carries besides the file's own. */
#define UET_LOST_INDEX   0xffffffffu /* a loss record: {u32 index, u32 0, u64 n} */
#define UET_LOST_PAYLOAD 16
#define UET_VOID_INDEX   0xfffffffeu /* a reservation given up (its payload faulted, or the
                                        daemon must answer the write): skipped, counted */

/* ---- the validation table: the daemon writes it, the process reads it ---- */

#define UET_TABLE_MAGIC   0x014c424154544555ULL /* "UETTABL" 1 */
#define UET_TABLE_VERSION 1
#define UET_TABLE_HDR     64
#define UET_SLOT_SIZE     32
#define UET_SLOT_LOCS     4
#define UET_TABLE_SLOTS   1024 /* slots the library asks for: write indexes 0..1023 */

struct uet_table_hdr {
	uint64_t magic;     /* the daemon's, stored last */
	uint32_t version;   /* UET_TABLE_VERSION */
	uint32_t nslots;    /* slots after the header */
	uint32_t slot_size; /* UET_SLOT_SIZE */
	uint32_t reserved[11];
};

/* One write index of the file. The daemon stores every field, then word
 * (ready set) with a release store, before the DIAG_IOCSREG that made the
 * index returns; it stores word again, with the new status, at every change
 * of the event's consumers. The other fields never change: a file's write
 * indexes live as long as the file. */
struct uet_slot {
	uint32_t word;       /* UET_W_READY | status << 8 | nloc << 16 | flags << 24 */
	uint32_t min_size;   /* payload bytes the fields take: fewer is EINVAL (all ones: any) */
	uint32_t ring_max;   /* the longest payload the ring takes; longer goes through FUSE */
	uint16_t type_id;    /* the event's common_type, the record's first two bytes */
	uint16_t reserved;
	uint32_t loc[UET_SLOT_LOCS]; /* the event's __data_loc/__rel_loc fields, in order */
};

#define UET_W_READY        1u
#define UET_W_STATUS(w)    (((w) >> 8) & 0xffu)  /* 0: nothing attached (EBADF) */
#define UET_W_NLOC(w)      (((w) >> 16) & 0xffu)
#define UET_W_FLAGS(w)     ((w) >> 24)
#define UET_SLOT_FUSE      1u /* write through FUSE while enabled (more loc fields than fit) */
#define UET_LOC_OFF(l)     ((l) & 0xffffu) /* the field's offset in the record, header included */
#define UET_LOC_REL        0x10000u       /* __rel_loc, else __data_loc */
#define UET_LOC_CHAR       0x20000u       /* a char type: its data ends in NUL */

#define UET_SLOT_OFF_WORD     0
#define UET_SLOT_OFF_MINSIZE  4
#define UET_SLOT_OFF_RINGMAX  8
#define UET_SLOT_OFF_TYPEID   12
#define UET_SLOT_OFF_LOC      16

/* ---- the private ioctls on the tree's user_events_data ---- */

/* UET_IOC_ID, out: which open file this descriptor refers to. */
struct uet_id {
	uint64_t file_id; /* the open file (one per open(2); dup and fork share it) */
	uint32_t abi;     /* UET_ABI_VERSION */
	uint32_t rings;   /* R: the rings of the set UET_IOC_SHARE takes (the daemon's drainers) */
};

/* UET_IOC_SHARE, in and out: the caller's descriptors, which the daemon
 * takes from the caller with pidfd_getfd(2). */
struct uet_share {
	uint32_t size;     /* in: sizeof(struct uet_share) */
	uint32_t abi;      /* in: UET_ABI_VERSION */
	int32_t  set_fd;   /* in: the ring set's memfd of UET_IOC_ID's R rings, sealed against growing and shrinking */
	int32_t  wake_fd;  /* in: the set's eventfd, which its rings wake the daemon by */
	int32_t  table_fd; /* in: the table's memfd, sealed against growing and shrinking */
	uint32_t flags;    /* in: 0 */
	uint64_t file_id;  /* in: UET_IOC_ID's */
	uint32_t nslots;   /* out: the table's slots */
	uint32_t reserved;
};

/* UET_IOC_STATUS (the v10 ABI's status page), in, on the tree's
 * user_events_status: the page's memfd, which the daemon takes and keeps
 * written with one status byte per event at its status index. */
struct uet_status_page {
	uint32_t size;    /* in: sizeof(struct uet_status_page) */
	int32_t  page_fd; /* in: a memfd of one page, sealed against growing and shrinking */
};

#define UET_SHARE_SIZE  40
#define UET_ID_SIZE     16
#define UET_STATUS_SIZE 8

/* '*' is user_events' DIAG_IOC_MAGIC; the kernel uses numbers 0 to 2. */
#define UET_IOC_ID     _IOR('*', 0x80, struct uet_id)
#define UET_IOC_SHARE  _IOWR('*', 0x81, struct uet_share)
#define UET_IOC_WAKE   _IO('*', 0x82)  /* wake the daemon: the wake socket was lost */
#define UET_IOC_FLUSH  _IO('*', 0x83)  /* drain the rings now: losses wait to be told */
#define UET_IOC_STATUS _IOW('*', 0x84, struct uet_status_page)

_Static_assert(sizeof(struct uet_table_hdr) == UET_TABLE_HDR, "table header");
_Static_assert(sizeof(struct uet_slot) == UET_SLOT_SIZE, "slot");
_Static_assert(offsetof(struct uet_slot, min_size) == UET_SLOT_OFF_MINSIZE, "min_size");
_Static_assert(offsetof(struct uet_slot, ring_max) == UET_SLOT_OFF_RINGMAX, "ring_max");
_Static_assert(offsetof(struct uet_slot, type_id) == UET_SLOT_OFF_TYPEID, "type_id");
_Static_assert(offsetof(struct uet_slot, loc) == UET_SLOT_OFF_LOC, "loc");
_Static_assert(sizeof(struct uet_share) == UET_SHARE_SIZE, "share");
_Static_assert(sizeof(struct uet_id) == UET_ID_SIZE, "id");
_Static_assert(sizeof(struct uet_status_page) == UET_STATUS_SIZE, "status page");

#endif
