package pass

import (
	"context"
	"strconv"
	"testing"
)

// A submitter that stops reading fills its reply ring; the worker that
// finds it full parks the result beside the workers (keeping its pass's
// lease) and goes on. So one worker process with a single worker keeps
// serving another client while a result waits, and the parked result
// reaches its submitter, once, when it reads again.
func TestFullReplyRingNeverStallsWorkersServingOtherClients(t *testing.T) {
	f := newSchedFiles(t)
	worker := startPoolChild(t, f, "WORKERS=1") // the only worker
	m := newMuteClient(t, f, 2)
	mute := map[uint64]string{}
	for i := 0; i < 3; i++ {
		arg := "mute-" + strconv.Itoa(i)
		mute[m.push(t, closureEcho, []byte(arg))] = arg
	}
	submit := ringView(t, f.submit)
	eventually(t, "the mute client's ring full and its third pass taken", func() bool {
		c := submit.Counters()
		return m.reply.Counters().Pushed == 2 && c.Claimed >= 3 && c.Acked == 2
	})

	// Another client is served, by that one worker, meanwhile.
	c := startClient(t, f.client())
	const n = 100
	hs := make([]*Handle, n)
	for i := range hs {
		var err error
		if hs[i], err = c.Submit(context.Background(), closureEcho, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range awaitAll(t, hs) {
		if string(v) != strconv.Itoa(i) {
			t.Fatalf("pass %d: %q", i, v)
		}
	}
	eventually(t, "the other client's passes acked", func() bool { return submit.Counters().Acked == 2+n })
	// The mute client's third result still waits: not dropped, not pushed.
	if pushed, c := m.reply.Counters().Pushed, submit.Counters(); pushed != 2 || c.Acked != 2+n {
		t.Fatalf("while the mute client does not read: %d results in its ring, %d passes acked", pushed, c.Acked)
	}

	got := map[uint64]string{}
	for len(got) < len(mute) {
		r := m.recv(t)
		if _, dup := got[r.token]; dup {
			t.Fatalf("token %d answered twice", r.token)
		}
		got[r.token] = string(r.data)
	}
	for tok, arg := range mute {
		if got[tok] != arg {
			t.Fatalf("mute pass %d (%q): got %q", tok, arg, got[tok])
		}
	}
	eventually(t, "every pass acked", func() bool { return submit.Counters().Acked == 3+n })
	st := poolChildStats(t, worker)
	if st["parked"] != 1 || st["released"] != 0 || st["orphaned-results"] != 0 || st["executed"] != 3+n {
		t.Fatalf("worker stats %v: want %d executed, one result parked, none released or dropped", st, 3+n)
	}
}
