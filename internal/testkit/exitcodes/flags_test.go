package exitcodes_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// binaries are the five binaries' commands, as their mains build them.
var binaries = []func() *cobra.Command{
	jobcmd.NewDailyCommand, jobcmd.NewWeeklyCommand, queuecmd.NewCommand, consolecmd.NewCommand, ctl.NewCommand,
}

// aFlag is one flag of one command: the binary's constructor, the words
// after the binary's name that reach the command, and the flag.
type aFlag struct {
	newCmd func() *cobra.Command
	path   string // "engagementctl cleanup"
	words  []string
	flag   *pflag.Flag
}

func (f aFlag) env() string {
	if e := f.flag.Annotations[cliflag.EnvAnnotation]; len(e) == 1 {
		return e[0]
	}
	return ""
}

// everyFlag walks every runnable command of every binary and returns its
// flags, its own and those it inherits, but help and version (cobra's).
func everyFlag(t *testing.T) []aFlag {
	t.Helper()
	var flags []aFlag
	var walk func(newCmd func() *cobra.Command, c *cobra.Command, words []string)
	walk = func(newCmd func() *cobra.Command, c *cobra.Command, words []string) {
		path := strings.Join(append([]string{c.Root().Name()}, words...), " ")
		if c.Runnable() && !c.Hidden {
			visit := func(f *pflag.Flag) {
				if f.Name != "help" && f.Name != "version" {
					flags = append(flags, aFlag{newCmd: newCmd, path: path, words: words, flag: f})
				}
			}
			c.LocalFlags().VisitAll(visit)
			c.InheritedFlags().VisitAll(visit)
		}
		for _, sub := range c.Commands() {
			walk(newCmd, sub, append(append([]string{}, words...), sub.Name()))
		}
	}
	for _, newCmd := range binaries {
		walk(newCmd, newCmd(), nil)
	}
	if len(flags) < 200 {
		t.Fatalf("found %d flags in the five binaries; the walk missed some", len(flags))
	}
	return flags
}

// parsed reports whether a flag of this type parses what it is given
// (a number, a duration, a bool), so that "not-a-value" must fail: a
// string flag may take any text, and checks it (or not) itself.
func parsed(f *pflag.Flag) bool {
	switch f.Value.Type() {
	case "string", "stringSlice", "stringArray", "stringToString":
		return false
	}
	return true
}

// TestEveryFlagFollowsTheRecipe holds every flag of every binary to what
// docs/development.md, "Adding a flag", promises, so that a flag added by
// the recipe needs no test of its own for these: a value it cannot parse,
// on the command line or from its environment variable, is exit 2 with one
// line naming the flag or the variable, before any database; its
// variable, if it has one, is read by no flag of another name; --help
// says which variable it reads; --help and the reference (make docs) list
// it. (A flag of one name may read a variable in one binary and none in
// another: the operator's engagementctl --as-of does not read the jobs'
// ENGAGEMENT_AS_OF, which a cron service's environment sets for them.)
func TestEveryFlagFollowsTheRecipe(t *testing.T) {
	t.Parallel()
	const garbage = "not-a-value"
	flags := everyFlag(t)

	envFlag := map[string]string{} // variable → the flag's name
	help := map[string]string{}    // command path → its --help
	runs := 0
	for _, f := range flags {
		env := f.env()
		if env != "" {
			if other, ok := envFlag[env]; ok && other != f.flag.Name {
				t.Errorf("%s: %s falls back to %s, which --%s also reads", f.path, "--"+f.flag.Name, env, other)
			}
			envFlag[env] = f.flag.Name
			if strings.ToUpper(env) != env {
				t.Errorf("%s --%s: variable %q is not upper case", f.path, f.flag.Name, env)
			}
		}

		if !f.flag.Hidden {
			h, ok := help[f.path]
			if !ok {
				res := cmdtest.Exec(t, f.newCmd, cmdtest.Env(), append(append([]string{}, f.words...), "--help")...)
				if res.Code != 0 {
					t.Fatalf("%s --help: exit %d: %s", f.path, res.Code, res.Stderr)
				}
				h, help[f.path] = res.Stdout, res.Stdout
			}
			if !strings.Contains(h, "--"+f.flag.Name+" ") {
				t.Errorf("%s --help does not list --%s", f.path, f.flag.Name)
			}
			if env != "" && !strings.Contains(h, "(env "+env+")") {
				t.Errorf("%s --help does not say --%s falls back to %s", f.path, f.flag.Name, env)
			}
			ref := filepath.Join("..", "..", "..", "docs", "reference", strings.ReplaceAll(f.path, " ", "_")+".md")
			page, err := os.ReadFile(ref)
			if err != nil {
				t.Errorf("%s: its reference page: %v (make docs)", f.path, err)
			} else if !strings.Contains(string(page), "--"+f.flag.Name) {
				t.Errorf("%s: %s does not list --%s (make docs)", f.path, ref, f.flag.Name)
			}
		}

		if !parsed(f.flag) {
			continue
		}
		runs++
		args := append(append([]string{}, f.words...), "--"+f.flag.Name+"="+garbage)
		res := cmdtest.Exec(t, f.newCmd, cmdtest.Env(), args...)
		wantOneLine(t, f.path+" --"+f.flag.Name+"="+garbage, res, "--"+f.flag.Name)
		if env != "" {
			runs++
			res := cmdtest.Exec(t, f.newCmd, cmdtest.Env(env+"="+garbage), f.words...)
			wantOneLine(t, f.path+" with "+env+"="+garbage, res, env)
		}
	}
	t.Logf("%d flags of %d commands; %d runs with a value that does not parse", len(flags), len(help), runs)

}

// wantOneLine checks a run refused its input as a usage error: exit 2,
// nothing on stdout, one line on stderr that names what was wrong.
func wantOneLine(t *testing.T, what string, res cmdtest.Result, names string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
	if res.Code != 2 || res.Stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], names) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", what, res.Code, res.Stdout, res.Stderr, names)
	}
}
