package callers

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/procmem"
	"github.com/uetrace/uetrace/internal/subsys"
	"golang.org/x/sys/unix"
)

const pageSize = 4096

// writeIndexOff is offsetof(struct user_reg, write_index).
const writeIndexOff = abi.UserRegSize - 4

// readStruct reads a size-prefixed uapi struct at arg as the kernel's
// get_user(size) and copy_struct_from_user read it: the u32 size first (a
// fault is an empty slice: subsys's EFAULT), then the size bytes, capped at
// a page — a larger size is E2BIG from the size field alone, and the
// kernel reads nothing more. A fault part-way gives the bytes before it,
// which subsys treats as memory ending there (EFAULT, after its own checks
// of what it could read). Only the process's vanishing is an error here.
func readStruct(c *Caller, arg uint64) ([]byte, error) {
	var sz [4]byte
	if _, err := c.Mem.ReadAt(sz[:], arg); err != nil {
		if errors.Is(err, unix.EFAULT) {
			return nil, nil
		}
		return nil, err
	}
	size := min(binary.NativeEndian.Uint32(sz[:]), pageSize)
	if size <= 4 {
		return sz[:], nil
	}
	b := make([]byte, size)
	n, err := c.Mem.ReadAt(b, arg)
	if err != nil && !errors.Is(err, unix.EFAULT) {
		return nil, err
	}
	return b[:n], nil
}

// Register is DIAG_IOCSREG by caller c on f, whose argument (the pointer
// FUSE passed) is arg: it reads struct user_reg from c's memory (see
// readStruct) and the command at its name_args as strndup_user(name_args,
// MAX_EVENT_DESC) would, hands them to f.Register, and stores the write
// index at arg's write_index. Linux ignores a failure of that store
// (put_user's result is dropped): so does Register, and counts it in
// the Stats.WriteIndexFaults of the Callers c came from. It returns the write index.
//
// The errors are subsys's, in the kernel's order; a caller that exited
// mid-way is ESRCH.
func Register(f *subsys.File, c *Caller, cred subsys.Cred, arg uint64) (int32, error) {
	reg, err := readStruct(c, arg)
	if err != nil {
		return 0, fmt.Errorf("register: %w", err)
	}
	a := subsys.RegisterArgs{Reg: reg}
	if len(reg) >= abi.UserRegSize {
		// The kernel reads the name after its checks of the struct;
		// reading it first changes nothing, as subsys decides in the
		// kernel's order which error comes first.
		if err := readName(c, binary.NativeEndian.Uint64(reg[16:]), &a); err != nil {
			return 0, err
		}
	}
	idx, err := f.Register(c.Process, cred, a)
	if err != nil {
		return 0, err
	}
	if c.sp != nil && c.sp.isReleased() {
		// The process exited or exec'd while it registered: what it
		// registered goes with the rest.
		c.Process.Release()
	}
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], idx)
	if _, err := c.Mem.WriteAt(w[:], arg+writeIndexOff); err != nil && c.cs != nil {
		c.cs.mu.Lock()
		c.cs.stats.WriteIndexFaults++
		c.cs.mu.Unlock()
	}
	return int32(idx), nil
}

// readName reads the command at nameArgs into a as strndup_user(name_args,
// MAX_EVENT_DESC) would: no NUL within 512 bytes is subsys's EINVAL (the
// bytes read), memory that cannot be read its EFAULT (NameFault). Only the
// process's vanishing is an error here.
func readName(c *Caller, nameArgs uint64, a *subsys.RegisterArgs) error {
	name, err := c.Mem.ReadString(nameArgs, eventdef.MaxCommandLen+1)
	switch {
	case err == nil, errors.Is(err, procmem.ErrNoNUL):
		a.Name = name
	case errors.Is(err, unix.EFAULT):
		a.NameFault = true
	default:
		return fmt.Errorf("register: %w", err)
	}
	return nil
}

// Unregister is DIAG_IOCSUNREG by caller c on f with argument arg: struct
// user_unreg read as Register reads user_reg, then f.Unregister.
func Unregister(f *subsys.File, c *Caller, arg uint64) error {
	b, err := readStruct(c, arg)
	if err != nil {
		return fmt.Errorf("unregister: %w", err)
	}
	return f.Unregister(c.Process, b)
}

// Delete is DIAG_IOCSDEL by caller c on f with argument arg, the address of
// the event's name: read as strndup_user(arg, MAX_EVENT_DESC) does (EFAULT
// if unreadable, EINVAL without a NUL within 512 bytes), then f.Delete.
func Delete(f *subsys.File, c *Caller, cred subsys.Cred, arg uint64) error {
	name, err := c.Mem.ReadString(arg, eventdef.MaxCommandLen+1)
	switch {
	case err == nil, errors.Is(err, procmem.ErrNoNUL):
		// subsys's EINVAL for a name of 512 bytes or more.
	case errors.Is(err, unix.EFAULT):
		return fmt.Errorf("delete: cannot read the name at %#x: %w", arg, unix.EFAULT)
	default:
		return fmt.Errorf("delete: %w", err)
	}
	return f.Delete(name, cred)
}

// RegisterV10 is DIAG_IOCSREG of the v10 ABI (subsys.RegisterV10) by
// caller c on f, when the struct at arg says it is 24 bytes long — a size
// today's ABI refuses (EINVAL): v10 reports false for any other, which is
// Register's to answer. It reads the struct and the name as Register
// does, and stores status_index and write_index in the caller's struct, a
// failure of those stores ignored as Linux ignored put_user's. Only a tree
// serving the v10 ABI (fusefs.Options.V10) calls it.
func RegisterV10(f *subsys.File, c *Caller, cred subsys.Cred, arg uint64) (v10 bool, err error) {
	reg, err := readStruct(c, arg)
	if err != nil {
		return true, fmt.Errorf("register: %w", err)
	}
	if len(reg) < 4 || binary.NativeEndian.Uint32(reg) != subsys.V10RegSize {
		return false, nil
	}
	a := subsys.RegisterArgs{Reg: reg}
	if len(reg) >= subsys.V10RegSize {
		if err := readName(c, binary.NativeEndian.Uint64(reg[8:]), &a); err != nil {
			return true, err
		}
	}
	wi, si, err := f.RegisterV10(cred, a)
	if err != nil {
		return true, err
	}
	var out [8]byte
	binary.NativeEndian.PutUint32(out[:], si)
	binary.NativeEndian.PutUint32(out[4:], wi)
	if _, err := c.Mem.WriteAt(out[:], arg+16); err != nil && c.cs != nil {
		c.cs.mu.Lock()
		c.cs.stats.WriteIndexFaults++
		c.cs.mu.Unlock()
	}
	return true, nil
}
