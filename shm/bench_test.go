package shm

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// The sinks keep results alive so the compiler cannot drop the calls.
var (
	benchSinkInt64 int64
	benchSinkInt   int
)

func BenchmarkFutexWakeNoWaiter(b *testing.B) {
	b.ReportAllocs()
	var w atomic.Uint32
	for b.Loop() {
		n, err := FutexWake(&w, 1)
		if err != nil {
			b.Fatal(err)
		}
		benchSinkInt += n
	}
}

func BenchmarkFutexWaitMismatch(b *testing.B) {
	b.ReportAllocs()
	var w atomic.Uint32
	w.Store(1)
	for b.Loop() {
		if err := FutexWait(&w, 0, -1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMonoNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchSinkInt64 += MonoNow()
	}
}

func BenchmarkClockGettimeSyscall(b *testing.B) {
	b.ReportAllocs()
	var ts unix.Timespec
	for b.Loop() {
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			b.Fatal(err)
		}
		benchSinkInt64 += ts.Nano()
	}
}

func BenchmarkCrashPointUnarmed(b *testing.B) {
	if name := ArmedCrashPoint(); name != "" {
		b.Skipf("%s=%s is set", CrashPointEnv, name)
	}
	b.ReportAllocs()
	for b.Loop() {
		CrashPoint("shm.bench.crashpoint")
	}
}
