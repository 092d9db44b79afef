package cli

// The package's own for its external tests (package cli_test), which
// build the jobs' commands too: internal/cli/jobcmd imports this package,
// so those tests cannot be in it.

// NewLogFlags is LogFlags as --log-level level --log-format format leave it.
func NewLogFlags(level, format string) *LogFlags { return &LogFlags{level: level, format: format} }
