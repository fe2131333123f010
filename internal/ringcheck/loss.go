package ringcheck

import (
	"math"
	"math/bits"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// ParseLoss reads a loss record (write index wire.LostIndex): the write
// index whose records were lost and how many the producer claims. ok is
// false for a record that is not one — a payload that is not
// wire.LostPayload bytes, or whose reserved word is not zero: the caller
// rejects it.
func ParseLoss(v *shmring.View) (idx uint32, n uint64, ok bool) {
	if v.Len != wire.LostPayload {
		return 0, 0, false
	}
	var p [wire.LostPayload]byte
	v.CopyPayload(p[:])
	if wire.LE.Uint32(p[4:]) != 0 {
		return 0, 0, false
	}
	return wire.LE.Uint32(p[:]), wire.LE.Uint64(p[8:]), true
}

// A LossBudget cuts a ring's loss claims to what its producer could have
// dropped since it shared the ring, less what it claimed before: at most
// one record per nanosecond on each possible CPU — a failed reserve alone
// takes longer — counting time by the reader's clock, not the records'
// stamps, which are the producer's. So a ring's losses can never exceed
// its lifetime's possible writes, and what sums them cannot be wrapped by
// one client's number. It is one reader's at a time.
type LossBudget struct {
	since   time.Time // when the producer shared the ring
	claimed uint64    // the records its loss records claimed, as cut
}

// NewLossBudget is the budget of a ring shared at since, whose loss
// records claimed claimed records before (as cut): a reader that takes a
// ring over from another goes on with its budget, so that handing a ring
// from one reader to another gives its producer no new claims.
func NewLossBudget(since time.Time, claimed uint64) LossBudget {
	return LossBudget{since: since, claimed: claimed}
}

// Since and Claimed are what NewLossBudget takes to go on with b.
func (b *LossBudget) Since() time.Time { return b.since }
func (b *LossBudget) Claimed() uint64  { return b.claimed }

// Charge adds n records another reader's cut let through.
func (b *LossBudget) Charge(n uint64) {
	b.claimed = min(b.claimed, math.MaxUint64-n) + n
}

// Cut is claim cut to the budget left; capped says it was over.
func (b *LossBudget) Cut(claim uint64) (n uint64, capped bool) {
	hi, could := bits.Mul64(uint64(max(time.Since(b.since), 0)), uint64(PossibleCPUs))
	if hi != 0 {
		could = math.MaxUint64
	}
	if left := could - min(b.claimed, could); claim > left {
		claim, capped = left, true
	}
	b.claimed += claim
	return claim, capped
}
