package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEveryToolHasHelpVersionCompletionAndMan runs the four tools as
// built from this checkout (with VCS stamping asked for, as `go build` and
// `go install ./cmd/...` do outside this machine's GOFLAGS): each prints
// its help with no arguments (exit 0) and for `help`; --version names the
// commit it was built from and the file format it reads, never a bare
// "(devel)"; the bash completion script, sourced into a real bash,
// completes commands and flags by asking the tool; the zsh script is
// valid zsh (when zsh is installed); the man page lists every command and
// flag of the definitions (ringctl's, read in-process).
func TestEveryToolHasHelpVersionCompletionAndMan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries")
	}
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, tool := range []string{"ringctl", "hbdump", "passbench", "shmbridge"} {
		cmd := exec.CommandContext(ctx, goTool, "build", "-buildvcs=true", "-o", filepath.Join(bin, tool), "../"+tool)
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", tool, err, out)
		}
	}
	// What the go command recorded in each binary (go version -m): the
	// module version and VCS revision --version must show. (A git
	// worktree's checkout is not stamped by this go command, a main
	// checkout is; both are checked against what was recorded.)
	recorded := func(tool string) (modVersion, revision string) {
		out, err := exec.CommandContext(ctx, goTool, "version", "-m", filepath.Join(bin, tool)).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[0] == "mod":
				modVersion = f[2]
			case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
				revision = strings.TrimPrefix(f[1], "vcs.revision=")
			}
		}
		return modVersion, revision
	}
	run := func(tool string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, tool), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s %q: %v", tool, args, err)
		} else if ee != nil {
			code = ee.ExitCode()
		}
		return code, stdout.String(), stderr.String()
	}

	for _, tool := range []string{"ringctl", "hbdump", "passbench", "shmbridge"} {
		t.Run(tool, func(t *testing.T) {
			for _, args := range [][]string{nil, {"help"}, {"--help"}} {
				code, out, errOut := run(tool, args...)
				if code != 0 || !strings.HasPrefix(out, "NAME:\n   "+tool+" - ") || !strings.Contains(out, "completion") ||
					!strings.Contains(out, "EXIT CODES:") || errOut != "" {
					t.Errorf("%s %q: exit %d\n%s%s", tool, args, code, out, errOut)
				}
			}
			code, out, _ := run(tool, "--version")
			if code != 0 || !strings.HasPrefix(out, tool+" ") || strings.Contains(out, "(devel)") || !strings.Contains(out, "file format 3.0") {
				t.Errorf("--version: exit %d\n%s", code, out)
			}
			switch mod, rev := recorded(tool); {
			case mod != "(devel)" && !strings.HasPrefix(out, tool+" "+mod+"\n"):
				t.Errorf("--version does not give the module version %s:\n%s", mod, out)
			case rev != "" && !strings.Contains(out, "\ncommit "+rev):
				t.Errorf("--version does not name the commit %s:\n%s", rev, out)
			case mod == "(devel)" && rev == "" && !strings.HasPrefix(out, tool+" unknown (built without VCS information"):
				t.Errorf("--version of a build without version or VCS information:\n%s", out)
			}

			code, man, _ := run(tool, "man")
			if code != 0 || !strings.Contains(man, ".TH") || !strings.Contains(man, "completion") {
				t.Errorf("man: exit %d\n%.400s", code, man)
			}

			code, script, _ := run(tool, "completion", "bash")
			if code != 0 {
				t.Fatalf("completion bash: exit %d", code)
			}
			complete := func(words ...string) []string {
				t.Helper()
				sh := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) +
					"; _" + tool + "_complete; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
				cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", sh)
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("bash completion of %q: %v", words, err)
				}
				return strings.Fields(string(out))
			}
			if got := complete(tool, "hel"); !slices.Equal(got, []string{"help"}) {
				t.Errorf("completing %q: %q", "hel", got)
			}
			if got := complete(tool, "com"); !slices.Contains(got, "completion") {
				t.Errorf("completing %q: %q", "com", got)
			}

			code, zsh, _ := run(tool, "completion", "zsh")
			if code != 0 || !strings.HasPrefix(zsh, "#compdef "+tool+"\n") {
				t.Errorf("completion zsh: exit %d\n%s", code, zsh)
			}
			if path, err := exec.LookPath("zsh"); err == nil {
				if out, err := exec.CommandContext(ctx, path, "-n", "-c", zsh).CombinedOutput(); err != nil {
					t.Errorf("zsh -n: %v\n%s", err, out)
				}
			}
		})
	}

	// ringctl's flags, completed after a path, and its man page, against
	// its command definitions.
	cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c",
		"source <(ringctl completion bash); COMP_WORDS=(ringctl inspect /dev/shm/x --js); COMP_CWORD=3; _ringctl_complete; printf '%s\\n' \"${COMPREPLY[@]}\"")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "--json" {
		t.Errorf("completing inspect's --js after PATH: %q %v", out, err)
	}
	_, man, _ := run("ringctl", "man")
	for _, c := range newApp(&bytes.Buffer{}).Commands {
		if !strings.Contains(man, c.Name) {
			t.Errorf("man page lacks command %s", c.Name)
		}
		for _, f := range c.Flags {
			if n := f.Names()[0]; !strings.Contains(man, `\-\-`+n) && !strings.Contains(man, "--"+n) {
				t.Errorf("man page lacks %s --%s", c.Name, n)
			}
		}
	}
}
