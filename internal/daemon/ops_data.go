package daemon

// The requests of a connection's user_events_data: DIAG_IOCSREG,
// DIAG_IOCSUNREG, DIAG_IOCSDEL and writev, as the kernel's
// user_events_ioctl and user_events_write_iter take them.

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/subsys"
)

// opRegister is DIAG_IOCSREG: the struct user_reg and the name, counted in the
// connection's and its uid's registrations before the subsystem sees them.
func (c *conn) opRegister(h wire.Header, body []byte) bool {
	if len(body) < 4 || uint64(wire.LE.Uint32(body)) > uint64(len(body)-4) {
		return c.result(0, fmt.Errorf("register: truncated message: %w", unix.EPROTO))
	}
	n := wire.LE.Uint32(body)
	reg, name := body[4:4+n], body[4+n:]
	if err := c.addRegs(1); err != nil {
		return c.result(0, c.overLimit(err))
	}
	idx, err := c.file.Register(c.proc.p, c.cred, subsys.RegisterArgs{Reg: reg, Name: string(name), NameFault: h.Flags&wire.FlagNameFault != 0})
	if err != nil {
		c.addRegs(-1)
		return c.result(0, err)
	}
	return c.reply(wire.LE.AppendUint32(wire.AppendResult(c.out[:0], 0, nil), idx))
}

// opUnregister is DIAG_IOCSUNREG.
func (c *conn) opUnregister(h wire.Header, body []byte) bool {
	err := c.file.Unregister(c.proc.p, body)
	if err == nil {
		c.addRegs(-1)
	}
	return c.result(0, err)
}

// opDelete is DIAG_IOCSDEL.
func (c *conn) opDelete(h wire.Header, body []byte) bool {
	return c.result(0, c.file.Delete(string(body), c.cred))
}

// opWrite is writev(2) of [write_index][payload], by the thread and on the CPU
// the header names (the client's word, checked: package ringcheck).
func (c *conn) opWrite(h wire.Header, body []byte) bool {
	// The thread and CPU are the client's word: checked (package ringcheck).
	w := c.w
	w.PID = c.threads.Thread(h.Arg)
	w.CPU = ringcheck.CPU(uint32(h.Flags))
	if c.set != nil {
		// A client with a ring sends here only what it could not
		// publish there (a record it cannot check itself): it comes
		// after what the ring holds, as it was written after it.
		c.s.Flush()
	}
	n, err := c.file.Writev(w, body)
	return c.result(int64(n), err)
}

// opWriteHead is a write longer than a message holds: its length and first bytes,
// all the subsystem needs of a record no consumer can take.
func (c *conn) opWriteHead(h wire.Header, body []byte) bool {
	if len(body) < 4 {
		return c.result(0, fmt.Errorf("write: truncated message: %w", unix.EPROTO))
	}
	w := c.w
	w.PID = c.threads.Thread(h.Arg)
	w.CPU = ringcheck.CPU(uint32(h.Flags))
	if c.set != nil {
		c.s.Flush()
	}
	n, err := c.file.WriteHead(w, body[4:], int(wire.LE.Uint32(body)))
	return c.result(int64(n), err)
}
