package deploy_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/version"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// No Docker engine runs where the tests run, so the image is not built
// here: the Dockerfile is read by BuildKit's own parser, its ARGs expanded
// by BuildKit's own lexer for the build arguments `make image` passes, its
// shell commands parsed by a shell parser, and the commands it names
// parsed by the binaries' own cobra commands.

// testBuildArgs are the build arguments the checks build with, as
// `make image VERSION=… REVISION=…` passes them.
var testBuildArgs = map[string]string{"VERSION": "v9.8.7-test", "REVISION": "0123abcd"}

// dockerfile is the repository's Dockerfile as BuildKit reads it.
type dockerfile struct {
	lex    *shell.Lex
	global shellEnv // the ARGs before the first FROM, with their defaults
	stages []stage
	// examples is the header comment's indented lines, '#' removed: the
	// shell commands it shows.
	examples string
}

// stage is one FROM and the instructions up to the next.
type stage struct {
	name, base string   // FROM's AS name and image, its ARGs expanded
	args       []string // the ARGs declared in the stage, in order
	defaults   shellEnv // their defaults
	ins        []*parser.Node
}

// shellEnv is a set of variables, for BuildKit's lexer.
type shellEnv map[string]string

func (e shellEnv) Get(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e shellEnv) Keys() []string {
	var keys []string
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// env is what the stage's instructions see, built with buildArgs: each
// ARG declared in the stage, with its build argument or its default. A
// global ARG is not visible unless the stage declares it again.
func (s stage) env(global shellEnv, buildArgs map[string]string) shellEnv {
	env := shellEnv{}
	for _, a := range s.args {
		switch v, ok := buildArgs[a]; {
		case ok:
			env[a] = v
		case s.defaults[a] != "":
			env[a] = s.defaults[a]
		default:
			env[a] = global[a]
		}
	}
	return env
}

// op is an instruction's keyword in lower case.
func op(n *parser.Node) string { return strings.ToLower(n.Value) }

// words are an instruction's arguments as the parser split them.
func words(n *parser.Node) []string {
	var out []string
	for w := n.Next; w != nil; w = w.Next {
		out = append(out, w.Value)
	}
	return out
}

// flagValue is the value of an instruction's --name=value flag.
func flagValue(n *parser.Node, name string) (string, bool) {
	for _, f := range n.Flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func loadDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("BuildKit does not parse the Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("BuildKit warns about the Dockerfile: %s", w.Short)
	}
	df := dockerfile{lex: shell.NewLex(res.EscapeToken), global: shellEnv{}}
	for _, n := range res.AST.Children {
		if op(n) == "from" {
			w := words(n)
			s := stage{defaults: shellEnv{}}
			if len(w) == 3 && strings.EqualFold(w[1], "as") {
				s.name = w[2]
			}
			if s.base, _, err = df.lex.ProcessWord(w[0], df.global); err != nil {
				t.Fatalf("line %d: FROM %s: %v", n.StartLine, w[0], err)
			}
			df.stages = append(df.stages, s)
			continue
		}
		if len(df.stages) == 0 {
			if op(n) != "arg" {
				t.Fatalf("line %d: %s before the first FROM", n.StartLine, n.Value)
			}
			for _, a := range words(n) {
				name, def, _ := strings.Cut(a, "=")
				if df.global[name], _, err = df.lex.ProcessWord(def, df.global); err != nil {
					t.Fatalf("line %d: ARG %s: %v", n.StartLine, a, err)
				}
			}
			continue
		}
		s := &df.stages[len(df.stages)-1]
		if op(n) == "arg" {
			for _, a := range words(n) {
				name, def, _ := strings.Cut(a, "=")
				s.args = append(s.args, name)
				if s.defaults[name], _, err = df.lex.ProcessWord(def, s.defaults); err != nil {
					t.Fatalf("line %d: ARG %s: %v", n.StartLine, a, err)
				}
			}
		}
		s.ins = append(s.ins, n)
	}
	if len(res.AST.Children) > 0 {
		lines := strings.Split(string(data), "\n")
		var ex []string
		for _, l := range lines[:res.AST.Children[0].StartLine-1] {
			if text, ok := strings.CutPrefix(l, "#"); ok && strings.HasPrefix(text, "  ") {
				ex = append(ex, text)
			}
		}
		df.examples = strings.Join(ex, "\n")
	}
	return df
}

// expandWord expands an instruction's word as BuildKit does, in env.
func (df dockerfile) expandWord(t *testing.T, n *parser.Node, word string, env shellEnv) string {
	t.Helper()
	v, _, err := df.lex.ProcessWord(word, env)
	if err != nil {
		t.Fatalf("line %d: %s: %v", n.StartLine, word, err)
	}
	return v
}

// shellCalls parses script as a POSIX shell does and returns each simple
// command: its variable assignments and its words, expanded in env.
func shellCalls(t *testing.T, where, script string, env shellEnv) []shellCall {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(script), "")
	if err != nil {
		t.Fatalf("%s does not parse as a shell command: %v", where, err)
	}
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	cfg := &expand.Config{Env: expand.ListEnviron(list...)}
	var calls []shellCall
	syntax.Walk(f, func(node syntax.Node) bool {
		call, ok := node.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		c := shellCall{assigns: map[string]string{}}
		for _, a := range call.Assigns {
			v := ""
			if a.Value != nil {
				if v, err = expand.Literal(cfg, a.Value); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
			c.assigns[a.Name.Value] = v
		}
		for _, w := range call.Args {
			s, err := expand.Literal(cfg, w)
			if err != nil {
				t.Errorf("%s: %v", where, err)
			}
			c.args = append(c.args, s)
		}
		calls = append(calls, c)
		return true
	})
	return calls
}

type shellCall struct {
	assigns map[string]string
	args    []string
}

// goBuild is a `go build` command line, parsed as the go command does.
type goBuild struct {
	env              map[string]string
	out              string
	trimpath         bool
	strip, dwarfless bool
	linkerVars       map[string]string // -X importpath.name=value
	packages         []string
}

func parseGoBuild(t *testing.T, where string, c shellCall) goBuild {
	t.Helper()
	b := goBuild{env: c.assigns, linkerVars: map[string]string{}}
	fs := flag.NewFlagSet("go build", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	fs.StringVar(&b.out, "o", "", "")
	fs.BoolVar(&b.trimpath, "trimpath", false, "")
	ldflags := fs.String("ldflags", "", "")
	fs.String("tags", "", "")
	fs.Bool("v", false, "")
	if err := fs.Parse(c.args[2:]); err != nil {
		t.Fatalf("%s: go build %q: %v (a flag this test does not know: teach it)", where, c.args[2:], err)
	}
	b.packages = fs.Args()
	link := flag.NewFlagSet("link", flag.ContinueOnError)
	link.SetOutput(new(bytes.Buffer))
	link.BoolVar(&b.strip, "s", false, "")
	link.BoolVar(&b.dwarfless, "w", false, "")
	link.Func("X", "", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("-X %s: want importpath.name=value", v)
		}
		b.linkerVars[name] = value
		return nil
	})
	if err := link.Parse(strings.Fields(*ldflags)); err != nil || link.NArg() > 0 {
		t.Errorf("%s: -ldflags %q: %v %q", where, *ldflags, err, link.Args())
	}
	return b
}

// goModVersion is the go directive of go.mod, as the go command reads it.
func goModVersion(t *testing.T) (goVersion, modulePath string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.GoVersion}} {{.Path}}")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	goVersion, modulePath, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return goVersion, modulePath
}

// imageRef splits an image reference into its name and tag.
func imageRef(ref string) (name, tag string) {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

// TestTheImageBuildsEveryBinaryStaticStrippedAndVersioned: the build stage
// runs go.mod's Go, downloads the modules in a layer of their own, and
// builds every binary under cmd/ static (no cgo), without file paths or
// symbols, with the image's VERSION as the binaries' --version.
func TestTheImageBuildsEveryBinaryStaticStrippedAndVersioned(t *testing.T) {
	t.Parallel()
	df := loadDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d FROM stages, want a build stage and a small final stage", len(df.stages))
	}
	build := df.stages[0]
	env := build.env(df.global, testBuildArgs)

	name, tag := imageRef(build.base)
	goMod, _ := goModVersion(t)
	builderGo, _, _ := strings.Cut(tag, "-")
	switch {
	case name != "golang" && name != "docker.io/library/golang":
		t.Errorf("the build stage is FROM %s, want golang:<go.mod's Go>", build.base)
	case !version.IsValid("go"+builderGo) || version.Lang("go"+builderGo) != version.Lang("go"+goMod):
		t.Errorf("the build stage runs Go %s (%s); go.mod says go %s: keep them in step", builderGo, build.base, goMod)
	case version.Compare("go"+builderGo, "go"+goMod) < 0 && builderGo != version.Lang("go" + builderGo)[2:]:
		t.Errorf("the build stage pins Go %s, older than go.mod's go %s", builderGo, goMod)
	}

	// The build's commands, in order.
	var (
		builds                              []goBuild
		copiedModFiles, download, copiedAll = -1, -1, -1
	)
	for i, n := range build.ins {
		switch op(n) {
		case "copy":
			w := words(n)
			srcs := w[:len(w)-1]
			if slices.Equal(srcs, []string{"."}) {
				copiedAll = i
			}
			if slices.Contains(srcs, "go.mod") && slices.Contains(srcs, "go.sum") {
				copiedModFiles = i
			}
		case "run":
			if n.Attributes["json"] {
				continue
			}
			where := fmt.Sprintf("Dockerfile line %d", n.StartLine)
			for _, c := range shellCalls(t, where, strings.Join(words(n), " "), env) {
				switch {
				case len(c.args) >= 3 && c.args[0] == "go" && c.args[1] == "mod" && c.args[2] == "download":
					download = i
				case len(c.args) >= 2 && c.args[0] == "go" && c.args[1] == "build":
					builds = append(builds, parseGoBuild(t, where, c))
				}
			}
		}
	}
	if copiedModFiles < 0 || download < copiedModFiles || copiedAll < download {
		t.Errorf("COPY of go.mod and go.sum at %d, go mod download at %d, COPY . . at %d: want them in that order, so the modules are a layer that editing code does not rebuild",
			copiedModFiles, download, copiedAll)
	}
	if len(builds) != 1 {
		t.Fatalf("%d go build commands in the build stage, want 1", len(builds))
	}
	b := builds[0]
	if b.env["CGO_ENABLED"] != "0" {
		t.Errorf("go build runs with CGO_ENABLED=%q, want 0: a static binary for a base image without libc", b.env["CGO_ENABLED"])
	}
	if !b.trimpath || !b.strip || !b.dwarfless {
		t.Errorf("go build: -trimpath %v, -ldflags -s %v, -w %v; want all three (no build paths, no symbol table, no DWARF)", b.trimpath, b.strip, b.dwarfless)
	}
	_ = &cli.Version // -X sets a string variable; this fails to compile if it is not one
	versionVar := reflect.TypeFor[cli.Env]().PkgPath() + ".Version"
	if got := b.linkerVars[versionVar]; got != testBuildArgs["VERSION"] {
		t.Errorf("built with VERSION=%s, the binaries' %s is %q (-X %v): want the image's VERSION, which --version prints",
			testBuildArgs["VERSION"], versionVar, got, b.linkerVars)
	}
	var built []string
	for _, p := range b.packages {
		bin, ok := strings.CutPrefix(path.Clean(p), "cmd/")
		if !ok || strings.Contains(bin, "/") {
			t.Errorf("go build builds %s, which is not a binary under cmd/", p)
			continue
		}
		built = append(built, bin)
	}
	for _, bin := range binaries(t) {
		if !slices.Contains(built, bin) {
			t.Errorf("the image does not build cmd/%s", bin)
		}
	}

	// The final stage takes what go build wrote.
	final := df.stages[len(df.stages)-1]
	took := false
	for _, n := range final.ins {
		if from, ok := flagValue(n, "from"); op(n) == "copy" && ok && from == build.name {
			w := words(n)
			if path.Clean(w[0]) == path.Clean(b.out) {
				took = true
			}
		}
	}
	if b.out == "" || !strings.HasSuffix(b.out, "/") || !took {
		t.Errorf("go build -o %q: want a directory the final stage copies with COPY --from=%s", b.out, build.name)
	}
}

// TestTheImageRunsTheNamedBinaryAsNonroot: the final stage is distroless's
// static image (CA certificates, tzdata, no shell) or scratch with the
// certificates, puts the binaries on PATH, runs as the numeric nonroot
// user, has no entrypoint (the command names the binary) and a default
// command that runs; its labels carry the build's version and revision.
func TestTheImageRunsTheNamedBinaryAsNonroot(t *testing.T) {
	t.Parallel()
	df := loadDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d FROM stages, want a build stage and a small final stage", len(df.stages))
	}
	final := df.stages[len(df.stages)-1]
	env := final.env(df.global, testBuildArgs)
	var (
		user     string
		copied   []string // destinations
		labels   = map[string]string{}
		cmd      []string
		cmdShell bool
	)
	for _, n := range final.ins {
		w := words(n)
		switch op(n) {
		case "user":
			user = df.expandWord(t, n, w[0], env)
		case "copy":
			copied = append(copied, df.expandWord(t, n, w[len(w)-1], env))
		case "label":
			for i := 0; i+1 < len(w); i += 3 { // key, value, "="
				labels[w[i]] = df.expandWord(t, n, w[i+1], env)
			}
		case "entrypoint":
			t.Errorf("line %d: ENTRYPOINT %q: the command names the binary; an entrypoint would swallow it", n.StartLine, w)
		case "cmd":
			cmd, cmdShell = w, !n.Attributes["json"]
		}
	}

	name, tag := imageRef(final.base)
	switch {
	case strings.HasPrefix(name, "gcr.io/distroless/static") && tag == "nonroot":
		// CA certificates, tzdata and the nonroot user are in the base; no shell.
	case final.base == "scratch":
		if !slices.ContainsFunc(copied, func(d string) bool { return strings.HasPrefix(d, "/etc/ssl/certs") }) {
			t.Error("a scratch image needs /etc/ssl/certs copied in, for TLS to PostgreSQL and the webhook")
		}
	default:
		t.Errorf("final stage FROM %s: want gcr.io/distroless/static-…:nonroot or scratch", final.base)
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n != nonrootUID {
		t.Errorf("final USER %q, want the numeric %d (Kubernetes can verify runAsNonRoot only for a numeric user)", user, nonrootUID)
	}
	if !slices.Contains(copied, "/usr/local/bin/") && !slices.Contains(copied, "/usr/local/bin") {
		t.Errorf("the final stage copies to %q, not /usr/local/bin (on PATH, so `docker run image engagement-daily` works)", copied)
	}

	// The default command runs: in exec form (there is no shell), a binary
	// of cmd/, with arguments its command takes.
	switch {
	case len(cmd) == 0:
		t.Error("no CMD: `docker run image` would fail; want one that runs, such as engagementctl --help")
	case cmdShell:
		t.Errorf("CMD %q is in shell form, and the image has no shell: write it as a JSON array", cmd)
	default:
		build, ok := commands[cmd[0]]
		if !ok {
			t.Errorf("CMD %q runs %s, which is not a binary under cmd/", cmd, cmd[0])
			break
		}
		if res := cmdtest.Exec(t, build, nil, cmd[1:]...); res.Code != 0 {
			t.Errorf("CMD %q exits %d: %s", cmd, res.Code, res.Stderr)
		}
	}

	_, module := goModVersion(t)
	for label, want := range map[string]string{
		"org.opencontainers.image.version":  testBuildArgs["VERSION"],
		"org.opencontainers.image.revision": testBuildArgs["REVISION"],
		"org.opencontainers.image.source":   "https://" + module,
	} {
		if got := labels[label]; got != want {
			t.Errorf("built with %v, the image's label %s is %q, want %q", testBuildArgs, label, got, want)
		}
	}
}

// dockerRun is a `docker run` command line: the environment it sets (with
// the value, when it gives one), and the command it runs in the image.
type dockerRun struct {
	env     map[string]*string
	command []string
}

// parseDockerRun reads docker run's options (the ones the examples use),
// the image, and the command after it.
func parseDockerRun(args []string) (dockerRun, error) {
	r := dockerRun{env: map[string]*string{}}
	withValue := []string{"-e", "--env", "--name", "-v", "--volume", "--network", "-p", "--publish", "-u", "--user", "-w", "--workdir", "--env-file"}
	bare := []string{"--rm", "-i", "-t", "-it", "-d", "--init"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case !strings.HasPrefix(a, "-"):
			if i+1 >= len(args) {
				return r, fmt.Errorf("no command after the image %s", a)
			}
			r.command = args[i+1:]
			return r, nil
		case slices.Contains(withValue, name):
			if !hasValue {
				if i++; i >= len(args) {
					return r, fmt.Errorf("%s without a value", a)
				}
				value = args[i]
			}
			if name == "-e" || name == "--env" {
				k, v, ok := strings.Cut(value, "=")
				r.env[k] = nil
				if ok {
					r.env[k] = &v
				}
			}
		case slices.Contains(bare, a):
		default:
			return r, fmt.Errorf("docker run option %s: not one this test knows; teach it", a)
		}
	}
	return r, fmt.Errorf("no image")
}

// flagEnv is the environment variable a flag falls back to, if any.
func flagEnv(f *pflag.Flag) string {
	if e := f.Annotations["engagement_env"]; len(e) > 0 {
		return e[0]
	}
	if _, rest, ok := strings.Cut(f.Usage, "(env "); ok {
		if name, _, ok := strings.Cut(rest, ")"); ok {
			return name
		}
	}
	return ""
}

// TestTheImagesExamplesAreRealCommandsThatKeepWakingHours: the shell
// commands the Dockerfile's header shows parse as a shell reads them; each
// `docker run` runs a binary of the image with flags and environment its
// cobra command takes (--help prints the help), and one that delivers
// sets quiet hours that, parsed by that command, keep waking hours in São
// Paulo's zone.
func TestTheImagesExamplesAreRealCommandsThatKeepWakingHours(t *testing.T) {
	t.Parallel()
	df := loadDockerfile(t)
	calls := shellCalls(t, "the Dockerfile's header", df.examples, nil)
	runs, delivering := 0, 0
	for _, c := range calls {
		if len(c.args) < 2 || c.args[0] != "docker" || c.args[1] != "run" {
			continue
		}
		runs++
		where := "Dockerfile example " + strconv.Quote(strings.Join(c.args, " "))
		r, err := parseDockerRun(c.args[2:])
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		binary, args := r.command[0], r.command[1:]
		build, ok := commands[binary]
		if !ok {
			t.Errorf("%s runs %q, which is not a binary of the image (%s)", where, binary, strings.Join(binaries(t), ", "))
			continue
		}
		if slices.Contains(args, "--help") {
			if res := cmdtest.Exec(t, build, nil, args...); res.Code != 0 || !strings.Contains(res.Stdout, "Usage:") {
				t.Errorf("%s: exit %d, no usage printed: %s", where, res.Code, res.Stderr)
			}
			continue
		}
		var names []string
		for k := range r.env {
			names = append(names, k)
		}
		checkInvocation(t, where, binary, args, names)
		if !delivers(binary) {
			continue
		}
		delivering++
		cmd, rest, err := build().Find(args)
		if err != nil {
			continue // checkInvocation reported it
		}
		if err := cmd.ParseFlags(rest); err != nil {
			continue
		}
		// What the command reads: the flag, else the literal value the
		// example gives its environment variable.
		value := func(name string) (string, bool) {
			f := cmd.Flags().Lookup(name)
			if f == nil {
				t.Fatalf("%s has no --%s", cmd.CommandPath(), name)
			}
			if f.Changed {
				return f.Value.String(), true
			}
			if v := r.env[flagEnv(f)]; v != nil {
				return *v, true
			}
			return "", false
		}
		quiet, ok := value("quiet-hours")
		zone, zoneOK := value("timezone")
		if !ok || !zoneOK {
			t.Errorf("%s: no quiet hours in the user's zone: add --quiet-hours %s --timezone %s (docs/deploy.md, \"Waking hours\")", where, wantQuiet, wantTimezone)
			continue
		}
		checkQuietHours(t, where, quiet, zone)
	}
	if runs == 0 || delivering == 0 {
		t.Errorf("the Dockerfile's header shows %d docker run examples, %d of a binary that delivers; want at least one of each", runs, delivering)
	}
}
