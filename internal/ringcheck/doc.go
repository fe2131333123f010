// Package ringcheck is what a reader of a producer's shared ring decides
// about who wrote each record and what it says it lost, before the record
// reaches a consumer: the thread id (Threads), the CPU (CPU) and the
// losses a loss record claims (ParseLoss, LossBudget). The kernel knows
// these from current; a producer writing into shared memory says them, so
// each is checked — the same way by the daemon's drainers and by a
// session's reader of a ring set the daemon handed over (package
// handover), since a record must reach a consumer the same whichever reads
// it.
//
// It is not the ring (package shmring) nor the checks of a write against
// its event (package eventdef, subsys's File), and it keeps nothing per
// record.
package ringcheck
