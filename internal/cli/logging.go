package cli

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// logFlags configure the zerolog logger every binary writes to stderr.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) register(fs *pflag.FlagSet) { f.registerLevel(fs, "info") }

// registerLevel registers the flags with level as --log-level's default.
func (f *logFlags) registerLevel(fs *pflag.FlagSet, level string) {
	fs.StringVar(&f.level, "log-level", level, "debug, info, warn or error")
	bindEnv(fs, "log-level", "LOG_LEVEL")
	fs.StringVar(&f.format, "log-format", "auto", "json, console, or auto: console when stderr is a terminal, else json")
	bindEnv(fs, "log-format", "LOG_FORMAT")
}

// logger builds the logger; logs go to w (stderr) only, never to stdout,
// which carries the summary.
func (f *logFlags) logger(w io.Writer, app string) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(f.level)))
	if err != nil || level == zerolog.NoLevel {
		return zerolog.Nop(), usagef("--log-level must be debug, info, warn or error, got %q", f.level)
	}
	format := strings.ToLower(strings.TrimSpace(f.format))
	if format == "auto" || format == "" {
		format = "json"
		if file, ok := w.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			format = "console"
		}
	}
	switch format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	default:
		return zerolog.Nop(), usagef("--log-format must be json, console or auto, got %q", f.format)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("app", app).Logger(), nil
}
