package main

import (
	"fmt"
	"strings"
)

// transport is one way for two processes to pass a turn back and forth.
type transport struct {
	Name          string
	DefaultRounds int
	Sleep         bool // waiters sleep in FutexWait instead of spinning
	About         string
}

// transports lists what passbench measures, in report order. For now these
// are the two hardware floors that any shared-memory transport sits on.
var transports = []transport{
	{Name: "spin", DefaultRounds: 100000, About: "both sides spin on one shared word (cache-line ping-pong)"},
	{Name: "futex", DefaultRounds: 20000, Sleep: true, About: "both sides sleep in FUTEX_WAIT on the word; the writer FUTEX_WAKEs"},
}

func lookupTransport(name string) (transport, error) {
	for _, t := range transports {
		if t.Name == name {
			return t, nil
		}
	}
	return transport{}, fmt.Errorf("unknown transport %q (have %s)", name, strings.Join(transportNames(), ", "))
}

func transportNames() []string {
	names := make([]string, len(transports))
	for i, t := range transports {
		names[i] = t.Name
	}
	return names
}
