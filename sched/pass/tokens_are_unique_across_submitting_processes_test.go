package pass

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// TestPassTwoSubmitters: two client processes submit at once to one pool;
// every pass gets a token no other pass has (the submit queue's counter,
// shared by all its clients), and each client gets every result of its
// own (the submitter role checks each against its arguments).
func TestPassTwoSubmitters(t *testing.T) {
	f := newSchedFiles(t)
	startPool(t, f.pool(2))
	const count = 150
	var subs []*proctest.Child
	for i := 0; i < 2; i++ {
		subs = append(subs, passHelper.Start(t, "submitter", append(f.env(), fmt.Sprintf("COUNT=%d", count))...))
	}
	tokens := map[uint64]bool{}
	for _, c := range subs {
		c.MustSucceed(t)
		out, _ := c.Output()
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(line, "done ") {
				if line != fmt.Sprintf("done resolved=%d unmatched=0", count) {
					t.Fatalf("submitter: %s", line)
				}
				continue
			}
			tok, err := strconv.ParseUint(strings.TrimPrefix(line, "token "), 10, 64)
			if err != nil {
				t.Fatalf("line %q", line)
			}
			if tokens[tok] {
				t.Fatalf("token %d handed out twice", tok)
			}
			tokens[tok] = true
			n++
		}
		if n != count {
			t.Fatalf("a submitter printed %d tokens, want %d:\n%s", n, count, out)
		}
	}
	if len(tokens) != 2*count {
		t.Fatalf("%d tokens", len(tokens))
	}
}
