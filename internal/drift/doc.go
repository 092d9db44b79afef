// Package drift holds tests, and only tests, that keep the tree's text to
// the Go declarations it repeats: the SQL files and CHECK constraints to
// the statuses and reasons package statemachine declares. It lives apart
// so that what these tests import (the jobs, to read their declarations)
// is linked by no package a binary or the benchmark module imports.
package drift
