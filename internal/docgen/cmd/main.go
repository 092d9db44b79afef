// Command docgen regenerates the command-line reference (docs/reference/*.md)
// from the binaries' cobra commands; `make docs` runs it from the
// repository's root:
//
//	go run ./internal/docgen/cmd               # writes docs/reference
//	go run ./internal/docgen/cmd -dir OUT      # writes OUT instead
//
// It prints the pages it wrote or removed on stderr. Errors exit 1.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/engagement-scheduler/engagement/internal/docgen"
)

func main() {
	dir := flag.String("dir", docgen.Dir, "directory of the generated pages")
	flag.Parse()
	changed, err := docgen.Write(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "docgen: %v\n", err)
		os.Exit(1)
	}
	if len(changed) == 0 {
		fmt.Fprintf(os.Stderr, "docgen: %s is up to date\n", *dir)
	}
	for _, name := range changed {
		fmt.Fprintf(os.Stderr, "docgen: updated %s/%s\n", *dir, name)
	}
}
