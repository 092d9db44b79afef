package transport

import (
	"context"
	"io"

	"github.com/rs/zerolog"
)

// Log "delivers" a message by writing one JSON line about it, for dry runs,
// a log line like the binary's own (its level, time and message, so a log
// platform files it as info, not as an unknown line):
//
//	{"level":"info","transport":"log","id":...,"user_id":...,"message_type":...,
//	 "message_key":...,"destination":...,"locale":...,"attempt":...,"text_chars":...,
//	 "time":...,"message":"not sent: the log transport"}
//
// It never writes the destination JID or the text (text_chars is len(text),
// in bytes). Send always succeeds, even when the writer fails.
type Log struct {
	log zerolog.Logger
}

// LogMessage is the message of the log transport's lines.
const LogMessage = "not sent: the log transport"

// NewLog returns a Log writing to w (nil discards).
func NewLog(w io.Writer) *Log {
	if w == nil {
		w = io.Discard
	}
	// One Write per line, so concurrent sends don't interleave.
	return &Log{log: zerolog.New(zerolog.SyncWriter(w)).With().Timestamp().Logger()}
}

// Name returns "log".
func (l *Log) Name() string { return "log" }

// Deduplicates returns true: nothing is really sent, so repeating is harmless.
func (l *Log) Deduplicates() bool { return true }

// Send writes d's line and returns ProviderMessageID "log-<id>".
func (l *Log) Send(_ context.Context, d Delivery) (Result, error) {
	l.log.Info().Str("transport", "log").Str("id", d.ID).Str("user_id", d.UserID).
		Str("message_type", d.Type).Str("message_key", d.Key).Str("destination", d.Destination).
		Str("locale", d.Locale).Int("attempt", d.Attempt).Int("text_chars", len(d.Text)).
		Msg(LogMessage)
	return Result{ProviderMessageID: "log-" + d.ID}, nil
}
