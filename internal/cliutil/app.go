package cliutil

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// What every shmkit tool shares besides the flag grammar (grammar.go),
// set up by Prepare so that a command added to any tool has it without
// asking: with no arguments a tool prints its help and exits 0; `TOOL
// help [COMMAND]` and `--help` anywhere show help; --version says which
// build it is and which file formats it reads; `TOOL completion bash|zsh`
// and `TOOL man` print the completion scripts and the manual page, both
// generated from the command definitions; usage errors are one line.

func init() {
	// The tools' only global flags; no -v alias (it reads as "verbose").
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and the file formats this build reads"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprint(c.App.Writer, VersionText(c.App.Name)) }
}

// helpVersionBlock is the VERSION section of urfave/cli's app help.
const helpVersionBlock = "{{if .Version}}{{if not .HideVersion}}\n\nVERSION:\n   {{.Version}}{{end}}{{end}}"

// prepared marks an app Prepare has set up, in its Metadata.
const prepared = "cliutil.prepared"

// Prepare sets app up as every shmkit tool is: the help command, help and
// exit codes on every command, --version, the completion and man commands,
// shell completion, usage errors returned (never printed with the help),
// and the behaviour with no arguments. Run calls it; it is idempotent.
func Prepare(app *cli.App) {
	if app.Metadata[prepared] != nil {
		return
	}
	app.EnableBashCompletion = true
	app.HideHelp, app.HideHelpCommand = false, false
	app.Version, app.HideVersion = Version(), false
	if app.CustomAppHelpTemplate == "" {
		app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + ExitCodesHelp + "\n"
	}
	// The version is --version's, not the help's: help texts (and their
	// goldens) stay the same from one build to the next.
	app.CustomAppHelpTemplate = strings.ReplaceAll(app.CustomAppHelpTemplate, helpVersionBlock, "")
	app.OnUsageError = usageError
	app.Action = noArguments(app.Action)
	app.Before = beforeAll(checkOutputFlags, app.Before)
	if findCommand(app.Commands, "completion") == nil {
		app.Commands = append(app.Commands, completionCommand(app.Name))
	}
	if findCommand(app.Commands, "man") == nil {
		app.Commands = append(app.Commands, manCommand(app.Name))
	}
	prepareCommands(app.Commands)
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[prepared] = true
	app.Setup()
	if h := findCommand(app.Commands, "help"); h != nil {
		// Setup added urfave/cli's help command (see prepareCommands):
		// one value shared by every app, so set once (tests run apps
		// side by side).
		hideHelpOnce.Do(func() { h.HideHelpCommand = true })
	}
}

var hideHelpOnce sync.Once

func prepareCommands(cmds []*cli.Command) {
	for _, c := range cmds {
		// No "help" subcommand under a command (`TOOL help COMMAND` and
		// --help are the help): urfave/cli would add its one shared help
		// command, even to itself.
		c.HideHelpCommand = true
		c.OnUsageError = usageError
		c.Before = beforeAll(checkOutputFlags, c.Before)
		if c.CustomHelpTemplate == "" {
			c.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + ExitCodesHelp + "\n"
		}
		prepareCommands(c.Subcommands)
	}
}

// beforeAll runs first, then then (when there is one).
func beforeAll(first, then cli.BeforeFunc) cli.BeforeFunc {
	return func(c *cli.Context) error {
		if err := first(c); err != nil {
			return err
		}
		if then != nil {
			return then(c)
		}
		return nil
	}
}

// usageError hands a command line the flag package refused to Run, which
// rewords it (urfave/cli would print it with the whole help).
func usageError(_ *cli.Context, err error, _ bool) error {
	return Exit(ExitUsage, &flagError{err: err})
}

// noArguments makes the tool's own action: with no arguments at all, the
// help (exit 0); otherwise action, or, for a tool whose every job is a
// command, "unknown command" (exit 2).
func noArguments(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() == 0 && c.NumFlags() == 0 {
			return cli.ShowAppHelp(c)
		}
		if action != nil {
			return action(c)
		}
		if c.Args().Present() {
			return Usage("unknown command %q (see %s help)", c.Args().First(), c.App.Name)
		}
		return Usage("missing COMMAND (see %s help)", c.App.Name)
	}
}

// completionCommand prints a shell's completion script. The scripts ask
// the tool itself (urfave/cli's --generate-bash-completion) for the
// commands and flags at the cursor, so they follow the command
// definitions of the binary installed.
func completionCommand(tool string) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the bash or zsh completion script",
		ArgsUsage: "bash|zsh",
		Description: strings.ReplaceAll("bash: source <(TOOL completion bash) in ~/.bashrc, or save it as\n"+
			"/etc/bash_completion.d/TOOL. zsh: source <(TOOL completion zsh) in ~/.zshrc, after compinit.\n"+
			"The script asks TOOL for the commands and flags at the cursor, and completes file names\n"+
			"where a PATH goes.", "TOOL", tool),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usage("completion: want one argument, bash or zsh")
			}
			script, err := CompletionScript(c.App.Name, c.Args().First())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}

// CompletionScript is the completion script of tool for shell (bash or
// zsh).
func CompletionScript(tool, shell string) (string, error) {
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(tool) + "_complete"
	var s string
	switch shell {
	case "bash":
		s = bashCompletion
	case "zsh":
		s = zshCompletion
	default:
		return "", Usage("completion: %q is not a shell this tool completes for (bash, zsh)", shell)
	}
	return strings.NewReplacer("TOOL", tool, "FUNC", fn).Replace(s), nil
}

const bashCompletion = `# bash completion for TOOL (generated by: TOOL completion bash)
FUNC() {
	local cur="${COMP_WORDS[COMP_CWORD]}"
	local -a words=("${COMP_WORDS[@]:0:COMP_CWORD}")
	local opts
	if [[ "$cur" == -* ]]; then
		opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F FUNC TOOL
`

const zshCompletion = `#compdef TOOL
# zsh completion for TOOL (generated by: TOOL completion zsh)
FUNC() {
	local cur=${words[CURRENT]}
	local -a opts
	if [[ $cur == -* ]]; then
		opts=("${(@f)$(${words[1,CURRENT-1]} $cur --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[1,CURRENT-1]} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ -n ${opts[1]} ]]; then
		compadd -- "${opts[@]}"
	else
		_files
	fi
}
compdef FUNC TOOL
`

// manCommand prints the manual page, generated from the command
// definitions.
func manCommand(tool string) *cli.Command {
	return &cli.Command{
		Name:        "man",
		Usage:       "print the manual page (roff)",
		Description: strings.ReplaceAll("TOOL man > TOOL.1 && man ./TOOL.1; or install it as /usr/local/share/man/man1/TOOL.1.", "TOOL", tool),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return Usage("man: takes no arguments, got %q", c.Args().First())
			}
			// Without the help command: urfave/cli's is one value
			// shared by every app, which its own setup may make a
			// subcommand of itself (the page would never end); help
			// is in the page's own words.
			page := *c.App
			page.Commands = slices.DeleteFunc(slices.Clone(c.App.Commands), func(cmd *cli.Command) bool { return cmd.Name == "help" })
			man, err := page.ToManWithSection(1)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, man)
			return err
		},
	}
}
