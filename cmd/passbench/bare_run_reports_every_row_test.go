package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A short real run of `passbench bare`: every row is there, measured in
// every round, the JSON decodes, and the text names every row and the
// reference as not for use. Figures are checked for shape, never speed.
func TestBareRunReportsEveryRow(t *testing.T) {
	out, code, err := runApp(t, "bare", "--messages", "3000", "--socket-messages", "300", "--rounds", "200",
		"--warmup", "10", "--repeat", "2", "--batch", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep BareReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Format != bareFormat || rep.Repeat != 2 || rep.Batch != 8 || rep.Payload != barePayload || rep.SlotSize != bareSlotSize || rep.Slots != bareSlots {
		t.Errorf("report header %+v", rep)
	}
	if len(rep.Rows) != len(bareRows) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(bareRows))
	}
	for i, row := range rep.Rows {
		if row.ID != bareRows[i].ID {
			t.Errorf("row %d is %q, want %q", i, row.ID, bareRows[i].ID)
		}
		if bareRows[i].RTT {
			if row.Kind != kindRTT || row.P50Ns == nil || row.P50Ns.N != 2 || row.P50Ns.Min <= 0 || row.MeanNs == nil || row.Rounds != 200 {
				t.Errorf("rtt row %+v", row)
			}
		} else if row.Kind != kindThroughput || row.MsgsPerSec == nil || row.MsgsPerSec.N != 2 || row.MsgsPerSec.Min <= 0 {
			t.Errorf("throughput row %+v", row)
		}
	}
	if len(rep.Runs) != 2*len(bareRows) {
		t.Errorf("%d runs, want %d", len(rep.Runs), 2*len(bareRows))
	}
	for _, r := range rep.Runs {
		if r.Round < 1 || r.Round > 2 || r.Seconds <= 0 || r.MsgsPerSec <= 0 {
			t.Errorf("run %+v", r)
		}
	}
	goals := 0
	for _, r := range rep.Ratios {
		if r.Ratio.N != 2 {
			t.Errorf("ratio %s over %d rounds, want 2", r.Name, r.Ratio.N)
		}
		if r.Met != nil {
			goals++
		}
	}
	if goals != 3 {
		t.Errorf("%d ratios with a goal, want 3", goals)
	}
	if rep.CPU.Error == "" && rep.CPU.WallSeconds <= 0 {
		t.Errorf("cpu %+v", rep.CPU)
	}
	var text bytes.Buffer
	if err := writeBareText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{bareLabelRef, "batches of 8", "TryLoan", "Go buffered channel", "Unix socket", "ping-pong", "ring ÷ bare ring", "not for use", "bare ring, batches of 8 (reference)", "locked instructions"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, text.String())
		}
	}
	checkNoLeftovers(t)
}
