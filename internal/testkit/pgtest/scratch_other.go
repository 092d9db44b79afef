//go:build !linux

package pgtest

// memoryRoot finds no memory file system but on Linux.
func memoryRoot(uint64) string { return "" }
