package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// peekReport is peek's JSON output: field names are a stable interface
// (docs/cli.md).
type peekReport struct {
	Path     string       `json:"path"`
	Kind     string       `json:"kind"`
	Messages []peekedJSON `json:"messages"`
	hex      bool         // payloads in hex in the text
	ids      bool         // the file has message ids: the text has an id column
}

type peekedJSON struct {
	Position   uint64 `json:"position"`
	Slot       uint64 `json:"slot"`
	State      string `json:"state"` // ready, writing (no payload yet), returned (deques)
	Deliveries int    `json:"deliveries"`
	Len        int    `json:"len"`
	DataHex    string `json:"data_hex"`
	// ID is the message's id, in a file with message ids (0 for a
	// message still being written).
	ID *uint64 `json:"id,omitempty"`
}

// runPeek shows the next messages of a ring or deque through the library's
// Peek on a read-only mapping: nothing is taken, nothing is written, no
// participant entry is used.
func runPeek(c *cli.Context, path string) error {
	max := c.Int("max")
	if max < 0 {
		return cliutil.Usage("peek: --max must not be negative")
	}
	k, v, err := openView(c, path)
	if err != nil {
		return err
	}
	defer v.Close()
	if k.peek == nil {
		return k.refuse(path, "peek", "rings and deques")
	}
	if max == 0 {
		max = int(^uint(0) >> 1) // Peek stops at a capacity of positions
	}
	ps, err := k.peek(v, max)
	if err != nil {
		return cliutil.FileError(path, err)
	}
	// Messages that dead consumers hold are not queued, so peek does not
	// list them: say they exist, as drain, push and watch do, or the list
	// looks like the whole story.
	if err := warnStranded(c, path, v); err != nil {
		return err
	}
	rep := &peekReport{Path: path, Kind: k.kind.String(), Messages: []peekedJSON{}, hex: cliutil.Hex(c)}
	if m, ok := v.(interface{ MessageIDs() bool }); ok {
		rep.ids = m.MessageIDs()
	}
	for _, p := range ps {
		m := peekedJSON{Position: p.Position, Slot: p.Slot, State: p.State.String(),
			Deliveries: p.Deliveries, Len: len(p.Data), DataHex: hex.EncodeToString(p.Data)}
		if rep.ids {
			id := p.ID
			m.ID = &id
		}
		rep.Messages = append(rep.Messages, m)
	}
	return output(c, rep)
}

func (rep *peekReport) write(w io.Writer) error {
	if len(rep.Messages) == 0 {
		_, err := fmt.Fprintf(w, "%s: no queued messages\n", rep.Path)
		return err
	}
	fmt.Fprintf(w, "%s: %s, in the order consumers take them (nothing was taken)\n", rep.Path, plural(len(rep.Messages), "message", "messages"))
	rows := [][]string{}
	for _, m := range rep.Messages {
		data := "-" // still being written
		if m.State != "writing" {
			b, _ := hex.DecodeString(m.DataHex)
			data = payloadText(b, rep.hex)
		}
		row := []string{strconv.FormatUint(m.Position, 10), strconv.FormatUint(m.Slot, 10), m.State,
			strconv.Itoa(m.Deliveries), strconv.Itoa(m.Len)}
		if rep.ids {
			id := "-" // still being written
			if m.ID != nil && m.State != "writing" {
				id = strconv.FormatUint(*m.ID, 10)
			}
			row = append(row, id)
		}
		rows = append(rows, append(row, data))
	}
	headers := []string{"position", "slot", "state", "deliveries", "length", "payload"}
	if rep.ids {
		headers = []string{"position", "slot", "state", "deliveries", "length", "id", "payload"}
	}
	return cliutil.DetailTable(w, headers, rows)
}

// payloadText shows a payload for people: quoted when it is printable
// UTF-8 text (and hex is not asked for), else as 0x and hex digits.
func payloadText(b []byte, asHex bool) string {
	if !asHex && utf8.Valid(b) {
		printable := true
		for _, r := range string(b) {
			if !unicode.IsPrint(r) {
				printable = false
				break
			}
		}
		if printable {
			return strconv.Quote(string(b))
		}
	}
	if len(b) == 0 {
		return `""`
	}
	return "0x" + hex.EncodeToString(b)
}

// previewBytes is how much of a payload inspect --slots shows.
const previewBytes = 24

// preview is a payload's start as inspect --slots shows it: payloadText
// of at most previewBytes bytes, "..." when cut.
func preview(b []byte) string {
	if len(b) <= previewBytes {
		return payloadText(b, false)
	}
	return payloadText(b[:previewBytes], false) + "..."
}

func peekCommand() *cli.Command {
	return command("peek", "show the next messages of a ring or deque without taking them (read-only)", "PATH [--max N] [--hex] [--format text|json | --json]", runPeek,
		"Maps the file read-only and lists up to N queued messages (default 10; 0: all) in the order\n"+
			"consumers take them, with position, slot, state, deliveries so far, the message id (files\n"+
			"created with --msg-ids) and payload: nothing is\n"+
			"taken, nothing is written, no participant entry is used, and no producer or consumer waits\n"+
			"for it. A deque lists [top, bottom) from the top, then its returned messages (taken once the\n"+
			"rest is empty). What it shows may be gone a moment later. Payloads are shown quoted when\n"+
			"they are printable text, else in hex (--hex: always); long ones below the table.",
		withFormat(append([]cli.Flag{&cli.IntFlag{Name: "max", Value: 10, Usage: "show at most `N` messages (0: all)"}},
			append(cliutil.EncodingFlags(), cliutil.AllowModeFlag(), cliutil.OwnerFlag())...)...)...)
}
