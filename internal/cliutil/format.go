package cliutil

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Output formats. Every command whose output has more than one form takes
// --format (FormatFlags): it alone chooses the output, and --json is its
// short form everywhere. How a payload is written inside the text output
// (as is, or hex) is a flag of its own (EncodingFlag), never a format.
const (
	FormatText       = "text"
	FormatJSON       = "json"
	FormatPrometheus = "prometheus"
)

// formatFlag is --format with the formats its command offers, the first
// the default.
type formatFlag struct {
	*cli.StringFlag
	formats []string
}

// FormatFlags are --format (one of formats, the first the default; usage
// says what each is, e.g. "json: schema hbdump.check/1") and --json, its
// short form.
func FormatFlags(usage string, formats ...string) []cli.Flag {
	if usage == "" {
		usage = strings.Join(formats, ", ")
	}
	return []cli.Flag{
		&formatFlag{StringFlag: &cli.StringFlag{Name: "format", Value: formats[0], Usage: "print `FORMAT`: " + usage}, formats: formats},
		&cli.BoolFlag{Name: "json", Usage: "short for --format json"},
	}
}

// Format is the output format the command line chose: --format, or json
// with --json. A format the command does not offer, or --json with
// another --format, is a usage error.
func Format(c *cli.Context) (string, error) {
	var ff *formatFlag
	for _, f := range commandFlags(c) {
		if x, ok := f.(*formatFlag); ok {
			ff = x
		}
	}
	if ff == nil {
		// A command with one output, or one given a plain --json of its
		// own rather than FormatFlags: --json still means JSON.
		if lookupFlag(commandFlags(c), "json") != nil && c.Bool("json") {
			return FormatJSON, nil
		}
		return FormatText, nil
	}
	f := c.String("format")
	if c.Bool("json") {
		if c.IsSet("format") && f != FormatJSON {
			return "", Usage("%s--json is short for --format json: it excludes --format %s", prefix(c), f)
		}
		return FormatJSON, nil
	}
	if !slices.Contains(ff.formats, f) {
		hint := ""
		if f == EncodingHex && lookupFlag(commandFlags(c), "encoding") != nil {
			hint = " (payloads in hex: --encoding hex)"
		}
		return "", Usage("%s--format %s: want %s%s", prefix(c), f, orList(ff.formats), hint)
	}
	return f, nil
}

// JSON reports whether the command line chose JSON output; for commands
// whose formats are text and json only, after Format validated them.
func JSON(c *cli.Context) bool {
	f, err := Format(c)
	return err == nil && f == FormatJSON
}

// commandFlags are the running command's flags (the app's for its own
// action).
func commandFlags(c *cli.Context) []cli.Flag {
	if subName(c) == "" {
		return c.App.Flags
	}
	return c.Command.Flags
}

// Payload encodings of text output.
const (
	EncodingText = "text"
	EncodingHex  = "hex"
)

// EncodingFlags are --encoding, how payloads are written in text output
// (text: as they are, or hex), and --hex, its short form (as --json is
// --format json's).
func EncodingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "encoding", Value: EncodingText, Usage: "write payloads in text output as `ENC`: text (as they are) or hex"},
		&cli.BoolFlag{Name: "hex", Usage: "short for --encoding hex"},
	}
}

// Encoding is the payload encoding the command line chose: --encoding,
// or hex with --hex.
func Encoding(c *cli.Context) (string, error) {
	e := c.String("encoding")
	if c.Bool("hex") {
		if c.IsSet("encoding") && e != EncodingHex {
			return "", Usage("%s--hex is short for --encoding hex: it excludes --encoding %s", prefix(c), e)
		}
		return EncodingHex, nil
	}
	if e != EncodingText && e != EncodingHex {
		return "", Usage("%s--encoding %s: want text or hex", prefix(c), e)
	}
	return e, nil
}

// Hex reports whether the command line chose hex payloads (after the
// command's Before validated --encoding).
func Hex(c *cli.Context) bool {
	e, err := Encoding(c)
	return err == nil && e == EncodingHex
}

// checkOutputFlags refuses a bad --format, --json with another format,
// or a bad --encoding, before the command does anything (a repair is not
// applied and then refused for its output format). Prepare makes it every
// command's Before.
func checkOutputFlags(c *cli.Context) error {
	if _, err := Format(c); err != nil {
		return err
	}
	if lookupFlag(commandFlags(c), "encoding") != nil { // EncodingFlags: --encoding and --hex
		if _, err := Encoding(c); err != nil {
			return err
		}
	}
	return nil
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
