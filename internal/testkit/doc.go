// Package testkit holds, in its subpackages, what the tests (and the demo)
// need and the binaries never import: throwaway PostgreSQL databases and
// clusters (pgtest), a real PgBouncer in front of them (poolertest),
// fixtures, running the real commands as processes (cmdtest), the local
// services the tests install and start (localsvc, redistest, pushtest) and
// scripted stand-ins for the bot's webhook and PostHog (webhooktest,
// posthogtest), and the exit-code matrix every binary shares (exitcodes). Production code lives outside it: internal/cli,
// internal/postgres, internal/seed.
package testkit
