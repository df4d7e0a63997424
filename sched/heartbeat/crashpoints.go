package heartbeat

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run of the package kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	crashHbReclaimBeforeFree     = "hb.reclaim.before-free"
	crashHbRegisterAfterClaim    = "hb.register.after-claim"
	crashHbRegisterAfterActivate = "hb.register.after-activate" // registered, before Register returns
	crashHbRegisterAfterRecover  = "hb.register.after-recover"  // a full table's recovery scan ran, before the claim retried
	crashHbLeaseAfterRecord      = "hb.lease.after-record"      // a lease record complete, before RecordLease returns
)
