package proctest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

var testHelper = Helper{Test: "TestProctestHelperProcess", Prefix: "proctest-"}

// TestProctestHelperProcess is the child side of this package's tests.
// Roles:
//
//	log    print "ok 1", "ok 2", "n 7", a line of three fields and "bad x"
//	crash  (as shm.CrashPoint does at the armed point) write the mark of
//	       $SHMKIT_CRASHPOINT to stderr and SIGKILL itself
//	kill   SIGKILL itself without the mark
//	fail   return an error
func TestProctestHelperProcess(t *testing.T) {
	testHelper.Serve(func(role string) error {
		switch role {
		case "log":
			fmt.Print("ok 1\nok 2\nn 7\nlast 3 abc\nbad x\n")
			return nil
		case "crash":
			fmt.Fprintln(os.Stderr, CrashPointMark+os.Getenv(CrashPointEnv))
			fallthrough
		case "kill":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour)
		case "fail":
			return errors.New("failed on purpose")
		}
		return fmt.Errorf("unknown role %q", role)
	})
}

func TestChildLogParsesWordValueLines(t *testing.T) {
	l := testHelper.Run(t, "log").Log()
	if !slices.Equal(l["ok"], []uint64{1, 2}) || !slices.Equal(l.Ints("n"), []int{7}) || len(l) != 2 {
		t.Fatalf("log %v", l)
	}
}

func TestRunToCrashSeesTheMark(t *testing.T) {
	c := testHelper.RunToCrash(t, "crash", "test.point", 1)
	if !c.DiedAt("test.point") || c.DiedAt("test.other") {
		t.Fatal("DiedAt does not tell the armed point from another")
	}
	if !KilledAt("test.point") {
		t.Fatal("the death was not recorded for the coverage check")
	}
}

// A child SIGKILLed without the mark, or failing, did not die at a point.
func TestDiedAtWantsTheMark(t *testing.T) {
	for _, role := range []string{"kill", "fail"} {
		c := testHelper.Start(t, role, Arm("test.point", 1)...)
		if c.DiedAt("test.point") {
			t.Errorf("%s: reported as died at the point", role)
		}
	}
}

func TestEnvNumbers(t *testing.T) {
	t.Setenv("PROCTEST_N", "42")
	if EnvInt("PROCTEST_N") != 42 || EnvUint64("PROCTEST_N") != 42 || EnvInt("PROCTEST_UNSET") != 0 {
		t.Fatal("EnvInt")
	}
	t.Setenv("PROCTEST_N", "4x")
	defer func() {
		if recover() == nil {
			t.Fatal("a malformed number did not panic")
		}
	}()
	EnvInt("PROCTEST_N")
}

func TestSeededRandRepeats(t *testing.T) {
	t.Setenv("PROCTEST_SEED", "12345")
	a, b := SeededRand(t, "PROCTEST_SEED"), SeededRand(t, "PROCTEST_SEED")
	if a.Uint64() != b.Uint64() {
		t.Fatal("the same seed gave other numbers")
	}
}
