package gather

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run of the package kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	crashAllgatherAfterPublish   = "allgather.after-publish"
	crashAllgatherBeforePublish  = "allgather.before-publish"
	crashAllgatherJoinAfterClaim = "allgather.join.after-claim"
)
