package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// rawDumpCap bounds the default whole-file dump of a file whose header does
// not validate (its size may be anything); --range dumps past it.
const rawDumpCap = 1 << 20

// damaged reports whether an open failed on the file's contents (which a
// raw dump can still show) rather than on access to it.
func damaged(err error) bool {
	for _, e := range []error{layout.ErrInvalid, layout.ErrTooShort, layout.ErrBadMagic, layout.ErrVersionMismatch,
		layout.ErrChecksum, layout.ErrUnknownKind, layout.ErrGeometry, shm.ErrTruncated, shm.ErrSizeMismatch, shm.ErrNotReady} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func runHexdump(c *cli.Context, path string) error {
	if err := exclusive(c, "hexdump", "header", "slot", "range"); err != nil {
		return err
	}
	var rng byteRange
	if c.IsSet("range") {
		var err error
		if rng, err = parseRange(c.String("range")); err != nil {
			return err
		}
	}
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return err
	}
	reg, err := shm.OpenAny(path, append(opts, shm.ReadOnly())...)
	if err != nil {
		if !damaged(err) || c.IsSet("slot") {
			return cliutil.FileError(path, err)
		}
		return rawHexdump(c, path, rng, err)
	}
	defer reg.Close()
	h := reg.Header()
	m, err := h.Map()
	if err != nil { // Decode validated the geometry: should not happen
		m = layout.Map{Fields: layout.HeaderFields()}
	}
	size := int64(len(reg.Bytes()))
	lo, hi := int64(0), size
	switch {
	case c.Bool("header"):
		hi = int64(h.HeaderSize)
	case c.IsSet("slot"):
		k := kinds[h.Kind]
		if k == nil || k.slot == nil {
			return cliutil.Usage("hexdump: --slot applies to rings, deques and hash maps; %s is a %s", path, h.Kind)
		}
		if lo, hi, err = k.slot(path, h, c.Int("slot")); err != nil {
			return err
		}
	case c.IsSet("range"):
		if lo, hi, err = clampRange(rng, size); err != nil {
			return err
		}
	}
	mem := reg.Bytes()
	w := bufio.NewWriter(c.App.Writer)
	if err := guard(path, func() error {
		return dump(w, func(off int64, b []byte) int { return copy(b, mem[off:hi]) }, lo, hi, &m)
	}); err != nil {
		return err
	}
	return w.Flush()
}

// rawHexdump dumps a file whose header does not validate, read with plain
// reads (never mapped, so it cannot fault), labelling the common header's
// fields, and exits 1 saying what failed.
func rawHexdump(c *cli.Context, path string, rng byteRange, openErr error) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return cliutil.FileError(path, openErr)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return cliutil.FileError(path, openErr)
	}
	size := st.Size()
	lo, hi := int64(0), size
	capped := false
	switch {
	case c.Bool("header"):
		hi = min(size, layout.HeaderSize)
	case c.IsSet("range"):
		if lo, hi, err = clampRange(rng, size); err != nil {
			return err
		}
	case size > rawDumpCap:
		hi, capped = rawDumpCap, true
	}
	m := rawLabels(f)
	r := chunkReader{f: f}
	w := bufio.NewWriter(c.App.Writer)
	if err := dump(w, r.read, lo, hi, &m); err != nil {
		return err
	}
	if r.err != nil {
		return cliutil.FileError(path, r.err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s: header does not validate: %s; dumped the raw bytes", path, cliutil.Cause(path, openErr))
	if capped {
		msg += fmt.Sprintf(" (the first %d of %d; use --range for more)", rawDumpCap, size)
	}
	return cliutil.Problems(msg)
}

// chunkReader reads a file for dump in 64 KiB chunks with plain reads. A
// short read (the file shrank meanwhile) ends the dump there.
type chunkReader struct {
	f    *os.File
	base int64
	buf  []byte
	err  error
}

func (r *chunkReader) read(off int64, b []byte) int {
	if off < r.base || off+int64(len(b)) > r.base+int64(len(r.buf)) {
		if r.buf == nil {
			r.buf = make([]byte, 64<<10)
		}
		n, err := r.f.ReadAt(r.buf[:cap(r.buf)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			r.err = err
		}
		r.base, r.buf = off, r.buf[:n]
	}
	if off-r.base >= int64(len(r.buf)) {
		return 0
	}
	return copy(b, r.buf[off-r.base:])
}

// rawLabels is the field table for a file whose header did not validate:
// the whole file's when the header itself decodes (only the size was
// wrong), else the common header's.
func rawLabels(f *os.File) layout.Map {
	head := make([]byte, layout.HeaderSize)
	if n, _ := f.ReadAt(head, 0); n == len(head) {
		if h, err := layout.Decode(head); err == nil {
			if m, err := h.Map(); err == nil {
				return m
			}
		}
	}
	return layout.Map{Fields: layout.HeaderFields()}
}

// dump writes lines of 16 bytes from [lo, hi): offset, hex, ASCII and the
// labels of the fields in the line, then the end offset. read copies the
// bytes at an offset and returns how many there were; it may read a
// mapping (dump then runs under guard). A short read ends the dump.
func dump(w io.Writer, read func(off int64, b []byte) int, lo, hi int64, m *layout.Map) error {
	var line [16]byte
	prevZero, starred := false, false
	for off := lo; off < hi; off += 16 {
		want := int(min(16, hi-off))
		n := read(off, line[:want])
		if n < want {
			hi = off + int64(n)
		}
		if n == 0 {
			break
		}
		zero := n == 16 && isZero(line[:n])
		if zero && prevZero {
			if !starred {
				fmt.Fprintln(w, "*")
				starred = true
			}
			continue
		}
		prevZero, starred = zero, false
		text := fmt.Sprintf("%08x  %s  |%s|%s%s", off, hexCols(line[:n]), ascii(line[:n]), strings.Repeat(" ", 16-n), labels(m, uint64(off), uint64(off)+uint64(n)))
		if _, err := fmt.Fprintln(w, strings.TrimRight(text, " ")); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%08x\n", hi)
	return err
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func hexCols(b []byte) string {
	var s strings.Builder
	for i := 0; i < 16; i++ {
		if i == 8 {
			s.WriteByte(' ')
		}
		if i < len(b) {
			fmt.Fprintf(&s, "%02x", b[i])
		} else {
			s.WriteString("  ")
		}
		if i < 15 {
			s.WriteByte(' ')
		}
	}
	return s.String()
}

func ascii(b []byte) string {
	s := make([]byte, len(b))
	for i, c := range b {
		if c >= 0x20 && c < 0x7f {
			s[i] = c
		} else {
			s[i] = '.'
		}
	}
	return string(s)
}

// labels names the fields of [lo, hi): one that began before lo and goes
// on ("...name"), then every one that starts in the line.
func labels(m *layout.Map, lo, hi uint64) string {
	var names []string
	for off := lo; off < hi; {
		name, f, start, ok := m.Locate(off)
		if !ok || f.Size == 0 {
			off++
			continue
		}
		if start < lo {
			name = "..." + name
		}
		names = append(names, name)
		off = start + f.Size
	}
	if len(names) == 0 {
		return ""
	}
	return "  " + strings.Join(names, ", ")
}

func hexdumpCommand() *cli.Command {
	return command("hexdump", "dump a shmkit file's bytes with every field labelled (read-only; any kind, even damaged)", "PATH [--header | --slot I | --range A:B]", runHexdump,
		`16 bytes a line: offset, hex, ASCII, then the fields that start in the line (a field
continued from an earlier line is shown as ...name). Runs of all-zero lines are collapsed
into one "*" line. A file whose header does not validate is dumped raw (the whole file up
to 1 MiB unless --range or --header says otherwise), with the header's fields labelled, and
the command exits 1 after saying on stderr what failed to validate.`,
		&cli.BoolFlag{Name: "header", Usage: "only the common header"},
		&cli.IntFlag{Name: "slot", Usage: "only slot `I` of a ring or deque (word and payload), or bucket I of a hash map"},
		&cli.StringFlag{Name: "range", Usage: "only bytes [A, B), decimal or 0x hex; A or B may be left out", Value: ""},
		cliutil.AllowModeFlag(), cliutil.OwnerFlag())
}
