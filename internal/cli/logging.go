package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// The environment variables of --log-level and --log-format, which set the
// level and format of every run's logs, the commands' without the flags
// included (see logFormat).
const (
	logLevelEnv  = "LOG_LEVEL"
	logFormatEnv = "LOG_FORMAT"
)

// LogFlags configure the zerolog logger every binary writes to stderr.
type LogFlags struct {
	level  string
	format string
}

// Register adds --log-level (default info) and --log-format to fs.
func (f *LogFlags) Register(fs *pflag.FlagSet) { f.RegisterLevel(fs, "info") }

// RegisterLevel registers the flags with level as --log-level's default.
func (f *LogFlags) RegisterLevel(fs *pflag.FlagSet, level string) {
	fs.StringVar(&f.level, "log-level", level, "debug, info, warn or error")
	bindEnv(fs, "log-level", logLevelEnv)
	fs.StringVar(&f.format, "log-format", "auto", "json, console, or auto: console when stderr is a terminal, else json")
	bindEnv(fs, "log-format", logFormatEnv)
}

// Logger builds the logger; logs go to w (stderr) only, never to stdout,
// which carries the summary.
func (f *LogFlags) Logger(w io.Writer, app string) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(f.level)))
	if err != nil || level == zerolog.NoLevel {
		return zerolog.Nop(), Usagef("--log-level must be debug, info, warn or error, got %q", f.level)
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
		return zerolog.Nop(), Usagef("--log-format must be json, console or auto, got %q", f.format)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("app", app).Logger(), nil
}

// routeLibraryLogs points the loggers of the libraries that have their own
// at libraryLog, once per process (Main calls it): go-redis's, the
// --dedupe-store's client, which otherwise prints raw "redis: … pool.go:…"
// lines to the process's stderr. With JSON logs every line on stderr is
// then a JSON log line.
func routeLibraryLogs() {
	libraryLogsOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

var libraryLogsOnce sync.Once

// libraryLog is the logger the libraries' loggers write through: the
// process's run's (Main sets it when Run runs it), in the run's format and
// at its level, once its flags are read. Until then, and in a process
// that runs commands in process (tests, several runs at once, none owning
// the process's stderr), it is nil and their messages are dropped.
var libraryLog atomic.Pointer[zerolog.Logger]

// processRunKey marks the context of the run that is the process (Run's).
type processRunKey struct{}

func withProcessRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, processRunKey{}, true)
}

func isProcessRun(ctx context.Context) bool {
	v, _ := ctx.Value(processRunKey{}).(bool)
	return v
}

// redisLogger is go-redis's logger (redis.SetLogger, one per process).
// go-redis logs mostly from its own goroutines, with context.Background
// (a dial for a pool waiter is one), so a message cannot be traced to a
// run's context: it goes to libraryLog. It is debug: every failure go-redis
// logs on a call's behalf it also returns to the caller, the dedupe store,
// whose error or warning the run reports in its own words; --log-level
// debug shows the library's detail.
type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	log := libraryLog.Load()
	if log == nil {
		return
	}
	if e := log.Debug(); e.Enabled() {
		e.Str("library", "go-redis").Msg(OneLine(fmt.Sprintf(format, v...)))
	}
}
