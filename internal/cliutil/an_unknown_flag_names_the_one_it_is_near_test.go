package cliutil

import (
	"testing"

	"github.com/urfave/cli/v2"
)

// TestAnUnknownFlagNamesTheOneItIsNear: the walkthrough typed `ringctl
// inspect PATH --slot` and was told only "unknown flag --slot". A flag
// within two edits of exactly one of the command's flags names it; one
// near none, or near two equally, names nothing; the flag stays refused.
func TestAnUnknownFlagNamesTheOneItIsNear(t *testing.T) {
	flags := []cli.Flag{
		&cli.BoolFlag{Name: "slots"}, &cli.BoolFlag{Name: "json"}, &cli.StringFlag{Name: "format"},
		&cli.StringFlag{Name: "allow-mode"}, &cli.StringFlag{Name: "owner"}, &cli.BoolFlag{Name: "help", Aliases: []string{"h"}},
		&cli.IntFlag{Name: "max"}, &cli.IntFlag{Name: "mix"},
	}
	for _, tc := range []struct{ typed, want string }{
		{"--slot", "unknown flag --slot (did you mean --slots?)"},
		{"--jsno", "unknown flag --jsno (did you mean --json?)"},
		{"--allow_mode", "unknown flag --allow_mode (did you mean --allow-mode?)"},
		{"--formt=json", "unknown flag --formt=json (did you mean --format?)"},
		{"--bogus", "unknown flag --bogus"},
		{"--mux", "unknown flag --mux"}, // --max and --mix, as near: neither
		{"-x", "unknown flag -x"},
	} {
		name := tc.typed[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		if got := reword("tool", "flag provided but not defined: -"+name, flags, []string{"PATH", tc.typed}); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.typed, got, tc.want)
		}
	}
}
