package cliutil

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// The flag grammar every shmkit command shares, as git and kubectl users
// expect: flags may come anywhere after the command's name, before or
// after its arguments; "--" ends the flags; a flag belongs to the command
// (one typed before the command's name is moved after it; only --version
// is the tool's own). urfave/cli stops parsing flags
// at the first argument, so Run reorders the command line before parsing
// (Reorder), and --generate-bash-completion stays the last argument, where
// urfave/cli looks for it.

// completeFlag is the argument shell completion scripts append.
const completeFlag = "--generate-bash-completion"

// Reorder returns args (args[0] is the program) with every flag before
// the positional arguments of its command, and the command that will run
// (nil for the app's own action). It adds only a "--", when an argument
// that looks like a flag must stay positional, and drops arguments only
// where urfave/cli would misread them: the arguments of a command line
// asking for --help (help on the command, not a topic named by them), and
// of one ending in a flag that wants a value (the error is the flag's).
func Reorder(app *cli.App, args []string) ([]string, *cli.Command) {
	if len(args) < 2 {
		return args, nil
	}
	rest := slices.Clone(args[1:])
	complete := app.EnableBashCompletion && rest[len(rest)-1] == completeFlag
	if complete {
		rest = rest[:len(rest)-1]
	}
	type typedFlag struct {
		words []string // the flag, and its value when separate
		level int      // 0: the app; i: path[i-1]
	}
	var (
		path     []*cli.Command
		flags    []typedFlag
		pos      []string
		dashdash bool
	)
	commands := app.Commands
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			dashdash = true
			break
		}
		if isFlagWord(a) {
			f := typedFlag{words: []string{a}, level: len(path)}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasValue && i+1 < len(rest) && takesValue(app, path, name) {
				f.words = append(f.words, rest[i+1])
				i++
			}
			flags = append(flags, f)
			continue
		}
		if len(pos) == 0 {
			if cmd := findCommand(commands, a); cmd != nil {
				path = append(path, cmd)
				commands = cmd.Subcommands
				continue
			}
		}
		pos = append(pos, a)
	}
	// Each flag goes to the command that runs, which refuses one it does
	// not have: a tool's own flags are those of its own action (hbdump's
	// table, passbench's), not global ones. Only --version, typed before
	// the command's name, stays the tool's.
	levels := make([][]string, len(path)+1)
	for _, f := range flags {
		name, _, _ := strings.Cut(strings.TrimLeft(f.words[0], "-"), "=")
		at := len(path)
		if f.level == 0 && name == "version" && !hasFlag(levelFlags(app, path, at), name) {
			at = 0
		}
		levels[at] = append(levels[at], f.words...)
	}
	// The command and its flags, without the arguments.
	head := func() []string {
		out := append([]string{args[0]}, levels[0]...)
		for i, cmd := range path {
			out = append(append(out, cmd.Name), levels[i+1]...)
		}
		return out
	}
	// A last flag that wants a value and has none must stay last, where
	// the flag package says so ("--stale needs a value"), rather than
	// take an argument for its value. (Not when completing: the flag is
	// being typed.)
	if n := len(flags); n > 0 && len(flags[n-1].words) == 1 && !complete {
		last := flags[n-1].words[0]
		name, _, hasValue := strings.Cut(strings.TrimLeft(last, "-"), "=")
		if !hasValue && takesValue(app, path, name) && rest[len(rest)-1] == last {
			return head(), leafOf(path)
		}
	}
	// --help anywhere shows the help of the command typed: urfave/cli
	// would take an argument after it for a help topic.
	if slices.ContainsFunc(levels[len(path)], func(a string) bool { return a == "--help" || a == "-h" }) {
		out := []string{args[0]}
		for _, cmd := range path {
			out = append(out, cmd.Name)
		}
		return append(out, "--help"), leafOf(path)
	}
	out := head()
	if dashdash || slices.ContainsFunc(pos, isFlagWord) {
		out = append(out, "--")
	}
	out = append(out, pos...)
	if complete {
		out = append(out, completeFlag)
	}
	return out, leafOf(path)
}

func leafOf(path []*cli.Command) *cli.Command {
	if len(path) == 0 {
		return nil
	}
	return path[len(path)-1]
}

// isFlagWord reports whether a looks like a flag ("-" alone is an
// argument: standard input, by convention).
func isFlagWord(a string) bool { return len(a) > 1 && a[0] == '-' }

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if slices.Contains(c.Names(), name) {
			return c
		}
	}
	return nil
}

// levelFlags are the flags of the app (level 0) or of path[l-1].
func levelFlags(app *cli.App, path []*cli.Command, l int) []cli.Flag {
	if l == 0 {
		return app.Flags
	}
	return path[l-1].Flags
}

func hasFlag(flags []cli.Flag, name string) bool {
	return lookupFlag(flags, name) != nil
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// takesValue reports whether flag name takes a value: the flag of that
// name nearest to the command typed so far (on the path, then in the
// commands below it, which a flag typed before its command's name
// belongs to) is not a boolean.
func takesValue(app *cli.App, path []*cli.Command, name string) bool {
	for l := len(path); l >= 0; l-- {
		if f := lookupFlag(levelFlags(app, path, l), name); f != nil {
			return !isBool(f)
		}
	}
	below := app.Commands
	if len(path) > 0 {
		below = path[len(path)-1].Subcommands
	}
	for _, c := range below {
		if f := lookupFlag(c.Flags, name); f != nil {
			return !isBool(f)
		}
	}
	return false
}

// isBool reports whether f is a boolean flag (one that takes no separate
// value), as the flag package decides it.
func isBool(f cli.Flag) bool {
	set := flag.NewFlagSet("", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	if f.Apply(set) != nil {
		return false
	}
	fl := set.Lookup(f.Names()[0])
	if fl == nil {
		return false
	}
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagError is a command line urfave/cli (the flag package under it)
// refused: reworded by Run with the flags as the user typed them.
type flagError struct {
	err error
}

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// The flag package's messages, and urfave/cli's.
var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	reInvalid   = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): (.*)$`)
	reNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	reRequired  = regexp.MustCompile(`^Required flags? "(.+)" not set$`)
	reNoTopic   = regexp.MustCompile(`^No help topic for '(.*)'$`)
)

// reword says what is wrong with a command line, quoting each flag as
// typed ("--json", not the flag package's "-json"), and for a bad value
// what the flag wants ("--capacity -8: must not be negative", not "parse
// error"). flags are the running command's; typed, the arguments; tool,
// the tool's name.
func reword(tool, msg string, flags []cli.Flag, typed []string) string {
	if m := reNoTopic.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("no command %q (see %s help)", m[1], tool)
	}
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		return "unknown flag " + spelled(m[1], typed) + nearest(m[1], flags)
	}
	if m := reNoValue.FindStringSubmatch(msg); m != nil {
		return spelled(m[1], typed) + " needs a value"
	}
	if m := reRequired.FindStringSubmatch(msg); m != nil {
		var names []string
		for _, n := range strings.Split(m[1], ", ") {
			names = append(names, "--"+n)
		}
		return "missing " + strings.Join(names, ", ") + " (required)"
	}
	if m := reInvalid.FindStringSubmatch(msg); m != nil {
		value, name, why := m[1], m[2], m[3]
		return fmt.Sprintf("%s %s: %s", spelled(name, typed), value, wants(lookupFlag(flags, name), value, why))
	}
	if strings.HasPrefix(msg, "bad flag syntax: ") {
		return "bad flag " + strings.TrimPrefix(msg, "bad flag syntax: ")
	}
	return msg
}

// spelled is flag name as the user typed it: "--json", "-json", or
// "--json" when it cannot be found.
func spelled(name string, typed []string) string {
	for _, a := range typed {
		if a == "--" {
			break
		}
		if !isFlagWord(a) {
			continue
		}
		flagPart, _, _ := strings.Cut(a, "=")
		if strings.TrimLeft(flagPart, "-") == name {
			return flagPart
		}
	}
	return "--" + name
}

// wants says what a flag of f's type accepts, for a value it refused.
func wants(f cli.Flag, value, why string) string {
	if strings.Contains(why, "out of range") {
		return "out of range"
	}
	switch f.(type) {
	case *cli.UintFlag, *cli.Uint64Flag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		if strings.HasPrefix(strings.TrimSpace(value), "-") {
			return "must not be negative"
		}
		return "not a whole number"
	case *cli.IntFlag, *cli.Int64Flag, *cli.IntSliceFlag, *cli.Int64SliceFlag:
		return "not a whole number"
	case *cli.Float64Flag, *cli.Float64SliceFlag:
		return "not a number"
	case *cli.DurationFlag:
		return "not a duration (give a unit: 500ms, 10s, 2m)"
	case *cli.BoolFlag:
		return "not true or false"
	}
	if why == "parse error" {
		return "not a valid value"
	}
	return why
}

// nearest is " (did you mean --NAME?)" for the one flag of the command
// whose name is within two edits of the unknown name (--slot for
// --slots, --jsno for --json), else "": the flag was refused, and the
// user told what they most likely meant.
func nearest(name string, flags []cli.Flag) string {
	name, _, _ = strings.Cut(name, "=")
	best, bestD, ties := "", 3, 0
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) < 3 { // -h and the like: every short name is near
				continue
			}
			switch d := editDistance(name, n); {
			case d < bestD:
				best, bestD, ties = n, d, 1
			case d == bestD && n != best:
				ties++
			}
		}
	}
	if best == "" || ties != 1 {
		return ""
	}
	return " (did you mean --" + best + "?)"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
