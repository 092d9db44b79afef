// Package first makes the Go runtime hold SIGINT and SIGTERM for the
// program from the first package initialized, instead of dying of them.
//
// Until a package calls signal.Notify, the runtime answers SIGINT and
// SIGTERM by ending the process (exit 143 for SIGTERM, no summary). Package
// earlystop calls it in its init, but the order in which Go initializes
// packages puts it after os, os/signal and everything they import: a stop
// in those first milliseconds (tens on a loaded machine) was fatal (issue
// 55: 10 of 10 SIGTERMs at 0 ms). This package imports nothing but unsafe,
// so it is initialized as soon as the runtime has started, before any
// package that imports another; its init asks the runtime to queue the two
// signals, as signal.Notify does first, through the same function
// (os/signal's signal_enable, which the runtime provides). A signal queued
// so is delivered to the first channel signal.Notify registers for it:
// earlystop's, which cli.Run reads.
//
// What comes before, the kernel loading the binary and the runtime's own
// start, runs no code of the program's: a signal then ends the process as
// it would any program's.
package first

import _ "unsafe" // for go:linkname

// signalEnable is os/signal's signal_enable, the runtime's: from the call
// on, signal sig is queued for os/signal instead of ending the process.
//
//go:linkname signalEnable os/signal.signal_enable
func signalEnable(sig uint32)

// The signals' numbers (syscall.SIGINT, syscall.SIGTERM), written out:
// importing syscall would put this package after it.
const (
	sigint  = 2
	sigterm = 15
)

func init() {
	signalEnable(sigint)
	signalEnable(sigterm)
}
