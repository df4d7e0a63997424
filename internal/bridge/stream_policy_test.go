package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestSubjectMatching(t *testing.T) {
	cases := []struct {
		pattern, subject string
		want             bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "x", true},
		{"*.b", "a.b", true},
		{"a", "a.b", false},
	}
	for _, c := range cases {
		if got := subjectMatches(c.pattern, c.subject); got != c.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}

// The out direction refuses streams that cannot keep its promise.
func TestCheckStreamRefusesUnfitStreams(t *testing.T) {
	ok := jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: jetstream.LimitsPolicy, Duplicates: time.Minute}
	if err := CheckStream(&jetstream.StreamInfo{Config: ok}, "s.x"); err != nil {
		t.Fatalf("a fit stream refused: %v", err)
	}
	for name, mut := range map[string]func(*jetstream.StreamConfig){
		"work queue": func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
		"interest":   func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy },
		"no window":  func(c *jetstream.StreamConfig) { c.Duplicates = 0 },
		"not bound":  func(c *jetstream.StreamConfig) { c.Subjects = []string{"other.>"} },
	} {
		c := ok
		mut(&c)
		if err := CheckStream(&jetstream.StreamInfo{Config: c}, "s.x"); !errors.Is(err, ErrStreamConfig) {
			t.Errorf("%s: %v, want ErrStreamConfig", name, err)
		}
	}
	if err := (StreamOptions{Stream: "S", DupWindow: 2 * time.Minute, MaxAge: time.Minute}).validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("window past MaxAge: %v, want ErrInvalidConfig", err)
	}
	if err := (StreamOptions{Stream: "S", MaxAge: time.Minute}).validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("the default window (2 min) past a MaxAge of 1 min: %v, want ErrInvalidConfig", err)
	}
}

// The message id names the file and the message, so that it is the same
// for every delivery and differs between rings and re-creations.
func TestMsgIDNamesFileAndMessage(t *testing.T) {
	if got := MsgID(0xab, 42); got != "00000000000000ab-42" {
		t.Fatalf("MsgID = %q", got)
	}
	if MsgID(1, 2) == MsgID(2, 2) || MsgID(1, 2) == MsgID(1, 3) {
		t.Fatal("ids collide")
	}
}
