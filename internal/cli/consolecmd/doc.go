// Package consolecmd is engagement-console's command: its flags,
// authentication settings and the HTTP server around package console. It
// is a package of its own so that no other binary links the console.
package consolecmd
