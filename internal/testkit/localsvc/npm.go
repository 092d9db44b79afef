package localsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// NpmCIArgs is how the tests install an npm package's dependencies from
// its package-lock.json:
//
//   - --ignore-scripts: none of them needs an install script to work (pg is
//     plain JavaScript; Baileys', a devDependency of the bot package's
//     tests, only refuses Node.js before 20, which Debian 12's nodejs is,
//     although the part the tests load runs on it), and no script from the
//     registry runs on the developer's machine;
//   - --omit=peer: Baileys' peer dependencies (sharp with its libvips
//     binaries, jimp, …) are for media, which no test sends: about 20 MB
//     less.
var NpmCIArgs = []string{"npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=peer"}

// NpmMissing lists what package.json in dir names (dependencies and
// devDependencies) and node_modules lacks: a package not installed, or one
// pinned to an exact version and installed at another. Empty: npm ci has
// nothing to do.
func NpmMissing(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Dependencies    map[string]string `json:"dependencies"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "package.json"), err)
	}
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	var missing []string
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.DevDependencies} {
		for name, spec := range deps {
			var installed struct {
				Version string `json:"version"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
			if err == nil {
				err = json.Unmarshal(b, &installed)
			}
			switch {
			case err != nil:
				missing = append(missing, name)
			case exact.MatchString(spec) && installed.Version != spec:
				missing = append(missing, fmt.Sprintf("%s@%s (installed: %s)", name, spec, installed.Version))
			}
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// NpmReady runs npm ci (NpmCIArgs) in dir when NpmMissing says something
// is missing, and reports whether it ran.
func NpmReady(ctx context.Context, dir string) (bool, error) {
	missing, err := NpmMissing(dir)
	if err != nil || len(missing) == 0 {
		return false, err
	}
	_, err = Run(ctx, dir, NpmCIArgs...)
	return true, err
}
