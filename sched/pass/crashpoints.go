package pass

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run of the package kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	crashPassWorkerAfterClaim   = "pass.worker.after-claim"
	crashPassWorkerAfterExecute = "pass.worker.after-execute"
	crashPassWorkerAfterResult  = "pass.worker.after-result"
	crashPassWorkerAfterPark    = "pass.worker.after-park"
	crashPassClientAfterPush    = "pass.client.after-push"
	crashPassBoardAfterClaim    = "pass.board.after-claim"
	crashPassPoisonAfterClaim   = "pass.poison.after-claim"
)
