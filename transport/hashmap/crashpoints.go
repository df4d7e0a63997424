package hashmap

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	crashHashmapDeleteAfterHomeLock = "hashmap.delete.after-home-lock"
	crashHashmapDeleteAfterLock     = "hashmap.delete.after-lock"
	crashHashmapDeleteAfterPublish  = "hashmap.delete.after-publish"
	crashHashmapInsertAfterClaim    = "hashmap.insert.after-claim"
	crashHashmapInsertAfterKey      = "hashmap.insert.after-key"
	crashHashmapInsertAfterPublish  = "hashmap.insert.after-publish"
	crashHashmapInsertAfterValue    = "hashmap.insert.after-value"
	crashHashmapPutAfterHomeLock    = "hashmap.put.after-home-lock"
	crashHashmapRepairAfterMark     = "hashmap.repair.after-mark"
	crashHashmapRepairAfterRollback = "hashmap.repair.after-rollback"
	crashHashmapUpdateAfterLock     = "hashmap.update.after-lock"
	crashHashmapUpdateAfterPublish  = "hashmap.update.after-publish"
	crashHashmapUpdateAfterWrite    = "hashmap.update.after-write"
)
