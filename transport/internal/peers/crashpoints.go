package peers

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	CrashPeersAttachAfterClaimEntry = "peers.attach.after-claim-entry"
	// The repairer entry (AsRepairer): held, before the repair runs; and
	// after the repair, before the entry is freed.
	CrashPeersRepairerAfterClaim    = "peers.repairer.after-claim"
	CrashPeersRepairerBeforeRelease = "peers.repairer.before-release"
)
