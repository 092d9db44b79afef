package localsvc

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// svcTest is the Debian package TestAptInstallLeavesNoServiceEnabled builds
// and installs: a system service that, like postgresql, redis-server or
// prometheus-pushgateway, its package enables and starts on install.
const svcTest = "engagement-svctest"

// svcTestRecommends is a small real package the test package recommends: an
// install that pulled Recommends would install it.
const svcTestRecommends = "sl"

// buildServicePackage writes svcTest's .deb into dir and returns its path.
// Its init script starts a process (a sleep, with a pid file) and its
// postinst does what Debian's packages do: enable the unit and the init
// script, then start the service through invoke-rc.d (which asks
// policy-rc.d).
func buildServicePackage(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "root")
	files := map[string]string{
		"DEBIAN/control": "Package: " + svcTest + "\nVersion: 1.0\nArchitecture: all\nMaintainer: engagement scheduler tests <tests@example.invalid>\n" +
			"Recommends: " + svcTestRecommends + "\nDescription: a service for internal/localsvc's tests\n",
		"DEBIAN/postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then\n" +
			"  if command -v deb-systemd-helper >/dev/null; then deb-systemd-helper enable " + svcTest + ".service; fi\n" +
			"  update-rc.d " + svcTest + " defaults >/dev/null\n" +
			"  invoke-rc.d " + svcTest + " start || true\nfi\n",
		"DEBIAN/postrm": "#!/bin/sh\nset -e\nif [ \"$1\" = purge ]; then update-rc.d " + svcTest + " remove >/dev/null || true; " +
			"if command -v deb-systemd-helper >/dev/null; then deb-systemd-helper purge " + svcTest + ".service || true; fi; fi\n",
		"etc/init.d/" + svcTest: "#!/bin/sh\n### BEGIN INIT INFO\n# Provides: " + svcTest + "\n# Required-Start: $remote_fs\n# Required-Stop: $remote_fs\n" +
			"# Default-Start: 2 3 4 5\n# Default-Stop: 0 1 6\n# Short-Description: internal/localsvc's test service\n### END INIT INFO\n" +
			"case \"$1\" in\n" +
			"  start) start-stop-daemon --start --background --make-pidfile --pidfile /run/" + svcTest + ".pid --exec /bin/sleep -- 3600 ;;\n" +
			"  stop) start-stop-daemon --stop --oknodo --remove-pidfile --pidfile /run/" + svcTest + ".pid --exec /bin/sleep ;;\n" +
			"  status) start-stop-daemon --status --pidfile /run/" + svcTest + ".pid --exec /bin/sleep ;;\n" +
			"esac\nexit 0\n",
		"lib/systemd/system/" + svcTest + ".service": "[Unit]\nDescription=internal/localsvc's test service\n[Service]\nExecStart=/bin/sleep 3600\n[Install]\nWantedBy=multi-user.target\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "DEBIAN/post") || strings.HasPrefix(name, "etc/init.d/") {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, svcTest+".deb")
	if _, err := Run(t.Context(), dir, "dpkg-deb", "--root-owner-group", "--build", root, deb); err != nil {
		t.Fatal(err)
	}
	// apt reads a local .deb as the _apt user, which must reach it.
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(deb, 0o644); err != nil {
		t.Fatal(err)
	}
	return deb
}

func installed(pkg string) bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", pkg).Output()
	return err == nil && strings.Contains(string(out), "ok installed")
}

// TestAptInstallLeavesNoServiceEnabled (issue 18, item 8: installing
// postgresql, redis-server and prometheus-pushgateway in a fresh Debian
// root pulled Recommends and left them enabled as system services): a
// package installed through AptInstall leaves its binaries only: its
// service neither runs nor is enabled (no SysV rc links, no systemd wants
// link), its Recommends are not installed, and the install is announced
// with how long it takes. The package is a real .deb installed by apt-get.
func TestAptInstallLeavesNoServiceEnabled(t *testing.T) {
	if installed(svcTest) {
		t.Fatalf("%s is installed before the test; remove it: dpkg --purge %s", svcTest, svcTest)
	}
	if installed(svcTestRecommends) {
		t.Fatalf("%s is installed, so the test cannot see whether Recommends are installed; remove it or change svcTestRecommends", svcTestRecommends)
	}
	deb := buildServicePackage(t, t.TempDir())
	sudo, err := sudoPrefix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append(append([]string{}, sudo...), "dpkg", "--purge", svcTest)
		if _, err := Run(ctx, "/", args...); err != nil {
			t.Errorf("remove the test package: %v", err)
		}
		if installed(svcTestRecommends) { // pulled in by a broken AptInstall
			args := append(append([]string{}, sudo...), "apt-get", "purge", "-y", svcTestRecommends)
			if _, err := Run(ctx, "/", args...); err != nil {
				t.Errorf("remove %s: %v", svcTestRecommends, err)
			}
		}
		if stray := servicePID(); stray > 0 {
			syscall.Kill(stray, syscall.SIGTERM) //nolint:errcheck // reported by the test already
		}
	})

	var said bytes.Buffer
	progress = &said
	defer func() { progress = os.Stderr }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if err := AptInstall(ctx, "localsvc test", deb, "cannot install the test package", svcTest); err != nil {
		t.Fatal(err)
	}

	if !installed(svcTest) {
		t.Fatalf("%s is not installed after AptInstall", svcTest)
	}
	if pid := servicePID(); pid > 0 {
		t.Errorf("the %s service runs (pid %d) after the install", svcTest, pid)
	}
	links, _ := filepath.Glob("/etc/rc[2-5].d/S*" + svcTest)
	wants, _ := filepath.Glob("/etc/systemd/system/*.wants/" + svcTest + ".service")
	if enabled := append(links, wants...); len(enabled) > 0 {
		t.Errorf("the %s service is left enabled: %v", svcTest, enabled)
	}
	if installed(svcTestRecommends) {
		t.Errorf("the install pulled the package's Recommends (%s)", svcTestRecommends)
	}
	// Issue 42: it says how many packages it installs, counted, not a
	// time it cannot know.
	m := regexp.MustCompile(`localsvc test: installing ` + regexp.QuoteMeta(deb) + ` with apt-get \(--no-install-recommends\): (\d+) Debian packages`).FindStringSubmatch(said.String())
	if m == nil || m[1] == "0" {
		t.Errorf("AptInstall said %q; want a line saying it installs the package and how many Debian packages that is (at least 1)", said.String())
	}
	// Issue 60: minutes of installing never pass behind one line; apt's
	// own status says how far it is.
	if steps := strings.Count(said.String(), "localsvc test: apt-get: installing "); steps < 2 ||
		!strings.Contains(said.String(), "localsvc test: installed "+deb+" in ") {
		t.Errorf("AptInstall said %q; want its progress (%d steps of the install said) and a line saying it is done", said.String(), steps)
	}
}

// servicePID is the pid of svcTest's running process, or 0.
func servicePID() int {
	b, err := os.ReadFile("/run/" + svcTest + ".pid")
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}
