package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The bar said "(1900/3000)": of what? Its text names the units.
func TestProgressNamesItsUnits(t *testing.T) {
	for _, tc := range []struct {
		desc, unit  string
		done, total int64
		d           time.Duration
		want        string
	}{
		{"ring/poll", "msgs", 1900, 3000, 0, "ring/poll    1900 of 3000 msgs"},
		{"rtt uds/block", "round trips", 5, 20000, 0, "rtt uds/block 5 of 20000 round trips"},
		{"pass", "passes", 0, 10, 0, "pass         0 of 10 passes"},
		{"ring/block", "msgs", 1900, 0, 3 * time.Second, "ring/block   1.9 of 3.0 s"},
	} {
		if got := progressText(tc.desc, tc.unit, tc.done, tc.total, tc.d); got != tc.want {
			t.Errorf("progressText(%q, %q, %d, %d, %v) = %q, want %q", tc.desc, tc.unit, tc.done, tc.total, tc.d, got, tc.want)
		}
	}
}

// With stdout not a terminal (a buffer here), a measurement says on
// stderr what it measures before it starts, and nothing else goes there.
func TestMeasurementAnnouncesItsStageWhenStdoutIsNoTerminal(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rtt", "--transport", "spin", "--rounds", "200", "--warmup", "10"}, "passbench: rtt spin/poll: 200 round trips\n"},
		{[]string{"run", "--transport", "chan", "--messages", "2000"}, "passbench: chan/block: 2000 msgs\n"},
	} {
		var out, errOut bytes.Buffer
		if err := newApp(&out, &errOut).RunContext(t.Context(), append([]string{"passbench"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if errOut.String() != tc.want {
			t.Errorf("%v: stderr %q, want %q", tc.args, errOut.String(), tc.want)
		}
		if !strings.Contains(out.String(), "p50") {
			t.Errorf("%v: no result on stdout:\n%s", tc.args, out.String())
		}
	}
	// On a terminal's stdout, no stage lines: the results show as they come.
	var errOut bytes.Buffer
	u := &ui{w: &errOut}
	u.track("ring/poll", "msgs", 10, 0, func() int64 { return 0 })()
	u.stage("x")
	if errOut.Len() != 0 {
		t.Errorf("printed %q with stdout on a terminal", errOut.String())
	}
}
