package localsvc

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Issue 55, finding 9: on a fresh Debian root, the README's prerequisites
// word for word (apt-get install -y --no-install-recommends git
// ca-certificates make gcc) left make demo dying in cgo: "_cgo_export.c:3:10:
// fatal error: stdlib.h: No such file or directory". gcc only recommends
// libc6-dev, and --no-install-recommends leaves it out.
//
// The test asks this machine what a cgo build reads: the C compiler
// (go env CC), every header of the C files cgo generates for an exported
// function (go tool cgo) and of runtime/cgo's C files for this platform
// (gcc -M), and the C library's start files and libc.so the link needs.
// dpkg says which package each comes from. Each must be installed by the
// prerequisite line (the packages it names and what they depend on or
// pre-depend on, never what they recommend, as --no-install-recommends
// installs them) or be on every Debian root already (priority required,
// or essential, with what those depend on). The dependencies are read
// from dpkg's own database of this machine's packages. Every prerequisite
// line of README.md and docs/*.md names the same packages.
func TestTheREADMEsPrerequisitesBuildWithCgo(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	lines := prerequisiteLines(t, root)
	if len(lines["README.md"]) == 0 || len(lines[filepath.Join("docs", "development.md")]) == 0 {
		t.Fatalf("README.md and docs/development.md must each give the prerequisites' apt-get line; found %v", lines)
	}
	var prereqs []string
	for file, ls := range lines {
		for _, l := range ls {
			if prereqs == nil {
				prereqs = l
			}
			if !slices.Equal(sorted(l), sorted(prereqs)) {
				t.Errorf("%s installs %v, another prerequisite line %v: they must agree", file, l, prereqs)
			}
		}
	}

	db := readDpkgStatus(t)
	for _, p := range prereqs {
		if _, ok := db.installed[p]; !ok {
			t.Errorf("%s, a prerequisite, is not installed on this machine: the test reads what it depends on from dpkg", p)
		}
	}
	start := append([]string{}, prereqs...)
	for name, pkg := range db.installed {
		if pkg.required {
			start = append(start, name)
		}
	}
	have := db.closure(start)

	files := cgoFiles(t)
	owners := packagesOf(t, files)
	missing := map[string][]string{} // package: the files read from it
	for _, f := range files {
		switch pkg := owners[f]; {
		case pkg == "":
			t.Errorf("a cgo build reads %s, which no Debian package installed: cannot tell what installs it", f)
		case !have[pkg]:
			missing[pkg] = append(missing[pkg], f)
		}
	}
	for _, pkg := range sortedKeys(distinct(owners)) {
		if fs := missing[pkg]; len(fs) > 0 {
			t.Errorf("a cgo build reads %d files of the package %s (%s), which the prerequisite line "+
				"(apt-get install -y --no-install-recommends %s) does not install, nor has a minimal Debian: add it to the line in README.md and docs/development.md",
				len(fs), pkg, examples(fs), strings.Join(prereqs, " "))
		}
	}
	t.Logf("prerequisites %v: a cgo build reads %d files of the packages %v", prereqs, len(files), sortedKeys(distinct(owners)))
}

// examples names a few of files, stdlib.h first when it is one of them.
func examples(files []string) string {
	fs := append([]string{}, files...)
	sort.SliceStable(fs, func(i, j int) bool {
		return filepath.Base(fs[i]) == "stdlib.h" && filepath.Base(fs[j]) != "stdlib.h"
	})
	if len(fs) > 3 {
		return strings.Join(fs[:3], ", ") + ", …"
	}
	return strings.Join(fs, ", ")
}

// prereqLine is the prerequisites' install command: the one whose packages
// include the C compiler.
var prereqLine = regexp.MustCompile("apt-get install -y --no-install-recommends ([^`]+)`")

// prerequisiteLines returns, by file (relative to root), the package lists
// of README.md's and docs/*.md's prerequisite apt-get lines.
func prerequisiteLines(t *testing.T, root string) map[string][][]string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]string{}
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ") // the command may wrap
		rel, _ := filepath.Rel(root, path)
		for _, m := range prereqLine.FindAllStringSubmatch(text, -1) {
			if pkgs := strings.Fields(m[1]); slices.Contains(pkgs, "gcc") {
				out[rel] = append(out[rel], pkgs)
			}
		}
	}
	return out
}

// cgoFiles lists the files of this machine's C toolchain that a cgo build
// reads: the compiler, the system headers of cgo's generated C files and
// of runtime/cgo's, and the C library files the link takes.
func cgoFiles(t *testing.T) []string {
	t.Helper()
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	cc := strings.Fields(goEnv("CC"))
	if len(cc) == 0 {
		t.Fatal("go env CC is empty")
	}
	compiler, err := exec.LookPath(cc[0])
	if err != nil {
		t.Fatalf("the C compiler %s (go env CC), which cgo needs: %v", cc[0], err)
	}
	files := map[string]bool{compiler: true}

	// The C files cgo writes for a package that exports a function, as
	// make demo's failure did (_cgo_export.c).
	dir := t.TempDir()
	src := "package x\n\n// static int add(int a, int b) { return a + b; }\nimport \"C\"\n\n//export Twice\nfunc Twice(n C.int) C.int { return C.add(n, n) }\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "cgo", "-objdir", "out", "x.go")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool cgo: %v\n%s", err, out)
	}
	generated, _ := filepath.Glob(filepath.Join(dir, "out", "*.c"))
	var sources [][]string // each: include directory, then C files
	sources = append(sources, append([]string{filepath.Join(dir, "out")}, generated...))

	// runtime/cgo's C files for this platform.
	cmd = exec.Command("go", "list", "-f", "{{.Dir}} {{join .CFiles \" \"}}", "runtime/cgo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list runtime/cgo: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		t.Fatalf("go list runtime/cgo lists no C files: %q", out)
	}
	rt := []string{f[0]}
	for _, c := range f[1:] {
		rt = append(rt, filepath.Join(f[0], c))
	}
	sources = append(sources, rt)

	goroot := goEnv("GOROOT")
	for _, s := range sources {
		for _, c := range s[1:] {
			out, err := exec.Command(compiler, "-M", "-I", s[0], c).CombinedOutput()
			if err != nil {
				t.Errorf("%s -M %s: %v\n%s", compiler, filepath.Base(c), err, out)
				continue
			}
			for _, h := range strings.Fields(strings.ReplaceAll(string(out), "\\\n", " ")) {
				if strings.HasSuffix(h, ":") || h == "\\" {
					continue // the rule's target, a line break
				}
				h = filepath.Clean(h)
				if !filepath.IsAbs(h) || strings.HasPrefix(h, dir+"/") || strings.HasPrefix(h, goroot+"/") {
					continue // Go's own files and cgo's output: no package's
				}
				files[h] = true
			}
		}
	}
	// What the link takes from the C library.
	for _, lib := range []string{"crt1.o", "crti.o", "crtn.o", "libc.so", "libc_nonshared.a"} {
		out, err := exec.Command(compiler, "-print-file-name="+lib).Output()
		if err != nil {
			t.Fatalf("%s -print-file-name=%s: %v", compiler, lib, err)
		}
		p := filepath.Clean(strings.TrimSpace(string(out)))
		if !filepath.IsAbs(p) {
			t.Errorf("%s does not find %s, which linking a cgo program needs", compiler, lib)
			continue
		}
		files[p] = true
	}
	return sortedKeys(files)
}

// packagesOf asks dpkg which package installed each file (through a
// symbolic link when the file's own path is not dpkg's); "" for none.
func packagesOf(t *testing.T, files []string) map[string]string {
	t.Helper()
	owners := map[string]string{}
	query := func(paths []string) map[string]string {
		out, _ := exec.Command("dpkg-query", append([]string{"-S"}, paths...)...).Output() // exit 1 when one is not found
		got := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			pkgs, path, ok := strings.Cut(line, ": ")
			if !ok || strings.HasPrefix(line, "diversion ") {
				continue
			}
			pkg, _, _ := strings.Cut(strings.Split(pkgs, ", ")[0], ":") // "libc6-dev:amd64"
			got[path] = pkg
		}
		return got
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Fatalf("dpkg-query: %v: the prerequisites are Debian's, and so is this test's reading of them", err)
	}
	found := query(files)
	var again []string
	resolved := map[string]string{}
	for _, f := range files {
		if p, ok := found[f]; ok {
			owners[f] = p
			continue
		}
		if r, err := filepath.EvalSymlinks(f); err == nil && r != f {
			resolved[f] = r
			again = append(again, r)
		}
	}
	if len(again) > 0 {
		found = query(again)
		for f, r := range resolved {
			owners[f] = found[r]
		}
	}
	return owners
}

// dpkgStatus is what dpkg's database says of the installed packages.
type dpkgStatus struct {
	installed map[string]dpkgPackage
	providers map[string][]string // a virtual package's installed providers
}

type dpkgPackage struct {
	depends  [][]string // Depends and Pre-Depends: groups of alternatives
	required bool       // on every Debian root: priority required, or essential
}

func readDpkgStatus(t *testing.T) dpkgStatus {
	t.Helper()
	f, err := os.Open("/var/lib/dpkg/status")
	if err != nil {
		t.Fatalf("dpkg's database: %v: the prerequisites are Debian's, and so is this test's reading of them", err)
	}
	defer f.Close()
	db := dpkgStatus{installed: map[string]dpkgPackage{}, providers: map[string][]string{}}
	fields := map[string]string{}
	var last string
	flush := func() {
		defer clear(fields)
		name := fields["Package"]
		if name == "" || !strings.HasSuffix(fields["Status"], " installed") {
			return
		}
		pkg := dpkgPackage{required: fields["Priority"] == "required" || fields["Essential"] == "yes"}
		for _, k := range []string{"Pre-Depends", "Depends"} {
			pkg.depends = append(pkg.depends, relations(fields[k])...)
		}
		db.installed[name] = pkg
		for _, group := range relations(fields["Provides"]) {
			for _, v := range group {
				db.providers[v] = append(db.providers[v], name)
			}
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			fields[last] += " " + strings.TrimSpace(line)
		default:
			k, v, _ := strings.Cut(line, ":")
			last, fields[k] = k, strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return db
}

// relations parses a Depends-like field into groups of alternatives,
// without versions or architecture qualifiers.
func relations(field string) [][]string {
	var out [][]string
	for _, group := range strings.Split(field, ",") {
		var alts []string
		for _, alt := range strings.Split(group, "|") {
			name := strings.Fields(alt)
			if len(name) == 0 {
				continue
			}
			n, _, _ := strings.Cut(name[0], ":")
			n, _, _ = strings.Cut(n, "(")
			alts = append(alts, n)
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// closure is every installed package that start needs, through Depends
// and Pre-Depends (the first alternative installed, or provided by an
// installed package), start included.
func (db dpkgStatus) closure(start []string) map[string]bool {
	have := map[string]bool{}
	queue := append([]string{}, start...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		pkg, ok := db.installed[name]
		if !ok || have[name] {
			continue
		}
		have[name] = true
		for _, group := range pkg.depends {
			for _, alt := range group {
				if _, ok := db.installed[alt]; ok {
					queue = append(queue, alt)
					break
				}
				if p := db.providers[alt]; len(p) > 0 {
					queue = append(queue, p[0])
					break
				}
			}
		}
	}
	return have
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}
