package transport

import (
	"context"
	"io"
	"sync"

	"github.com/spf13/pflag"
)

// Log "delivers" a message by writing one JSON line about it, for dry runs:
//
//	{"transport":"log","id":...,"user_id":...,"message_type":...,"message_key":...,
//	 "destination":...,"locale":...,"attempt":...,"text_chars":...}
//
// It never writes the destination JID or the text (text_chars is len(text),
// in bytes). Send always succeeds, even when the writer fails.
type Log struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLog returns a Log writing to w (nil discards).
func NewLog(w io.Writer) *Log {
	if w == nil {
		w = io.Discard
	}
	return &Log{w: w}
}

// LogKind offers the log to the binaries: --transport log, without flags
// of its own. It writes to the command's stderr.
var LogKind = Kind{
	Name:  "log",
	Help:  "one JSON line per message on stderr, nothing sent (dry runs)",
	Flags: func(*pflag.FlagSet) Config { return logFlags{} },
}

// logFlags is the log's configuration: none.
type logFlags struct{}

func (logFlags) Missing() string                           { return "" }
func (logFlags) Build(stderr io.Writer) (Transport, error) { return NewLog(stderr), nil }

// Name returns "log".
func (l *Log) Name() string { return "log" }

// Deduplicates returns true: nothing is really sent, so repeating is harmless.
func (l *Log) Deduplicates() bool { return true }

type logLine struct {
	Transport   string `json:"transport"`
	ID          string `json:"id"`
	UserID      string `json:"user_id"`
	MessageType string `json:"message_type"`
	MessageKey  string `json:"message_key"`
	Destination string `json:"destination"`
	Locale      string `json:"locale"`
	Attempt     int    `json:"attempt"`
	TextChars   int    `json:"text_chars"`
}

// Send writes d's line and returns ProviderMessageID "log-<id>".
func (l *Log) Send(_ context.Context, d Delivery) (Result, error) {
	line, err := marshalJSON(logLine{
		Transport: "log", ID: d.ID, UserID: d.UserID, MessageType: d.Type, MessageKey: d.Key,
		Destination: d.Destination, Locale: d.Locale, Attempt: d.Attempt, TextChars: len(d.Text),
	})
	if err == nil {
		line = append(line, '\n')
		l.mu.Lock()
		_, _ = l.w.Write(line) // one Write per line, so concurrent sends don't interleave
		l.mu.Unlock()
	}
	return Result{ProviderMessageID: "log-" + d.ID}, nil
}
