package cli

// Version is the binaries' version, set at build time:
//
//	go build -ldflags "-X github.com/engagement-scheduler/engagement/internal/cli.Version=v1.4.0" ./cmd/...
//
// (make build and the image set it from git describe). A plain go build
// leaves it empty, and --version says "dev".
var Version = ""

// version is what --version prints after the binary's name.
func version() string {
	if Version == "" {
		return "dev"
	}
	return Version
}
