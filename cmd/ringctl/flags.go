package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// Flag values the verbs share or parse: one file for what the command
// line means, apart from what the verbs do.

// withFormat is flags with --format text|json and its short form --json
// first, for the verbs whose output has a JSON schema.
func withFormat(flags ...cli.Flag) []cli.Flag {
	return append(cliutil.FormatFlags("text, or json (schema in docs/cli.md)", cliutil.FormatText, cliutil.FormatJSON), flags...)
}

// exclusive refuses more than one of flags: "verb: --a, --b and --c
// exclude each other".
func exclusive(c *cli.Context, verb string, flags ...string) error {
	var set []string
	for _, f := range flags {
		if c.IsSet(f) {
			set = append(set, f)
		}
	}
	if len(set) < 2 {
		return nil
	}
	names := make([]string, len(flags))
	for i, f := range flags {
		names[i] = "--" + f
	}
	return cliutil.Usage("%s: %s and %s exclude each other", verb, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// byteRange is a half-open range of file offsets; hi < 0 means "to the end".
type byteRange struct{ lo, hi int64 }

func parseRange(s string) (byteRange, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return byteRange{}, cliutil.Usage("hexdump: --range %q: want A:B", s)
	}
	r := byteRange{lo: 0, hi: -1}
	var err error
	if a != "" {
		if r.lo, err = parseOffset(a); err != nil {
			return r, cliutil.Usage("hexdump: --range %q: %v", s, err)
		}
	}
	if b != "" {
		if r.hi, err = parseOffset(b); err != nil {
			return r, cliutil.Usage("hexdump: --range %q: %v", s, err)
		}
		if r.hi <= r.lo {
			return r, cliutil.Usage("hexdump: --range %q: the end must be after the start", s)
		}
	}
	return r, nil
}

func parseOffset(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not an offset (decimal, or hex with 0x)", s)
	}
	return v, nil
}

func clampRange(r byteRange, size int64) (lo, hi int64, err error) {
	if r.lo >= size {
		return 0, 0, cliutil.Usage("hexdump: --range starts at %d, past the end of the file (%d bytes)", r.lo, size)
	}
	hi = r.hi
	if hi < 0 || hi > size {
		hi = size
	}
	return r.lo, hi, nil
}

func parseSeq(s string) (lo, hi int64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if ok {
		lo, err = strconv.ParseInt(a, 10, 64)
	}
	if ok && err == nil {
		hi, err = strconv.ParseInt(b, 10, 64)
	}
	if !ok || err != nil {
		return 0, 0, cliutil.Usage("push: --seq %q: want A:B, two decimal integers", s)
	}
	if lo > hi {
		return 0, 0, cliutil.Usage("push: --seq %q: A must not be greater than B", s)
	}
	return lo, hi, nil
}
