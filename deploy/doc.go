// Package deploy holds what runs the engagement scheduler's binaries on a
// schedule, and the tests that keep it true to the binaries.
//
//   - k8s/: Kubernetes manifests. CronJobs for engagement-daily (06:00 UTC),
//     engagement-weekly (Mondays 09:00 UTC) and queue-process (every 5
//     minutes); cronjob-daily-sharded.yaml, the daily job as an Indexed Job
//     of N shards; migrate-job.yaml, `engagementctl migrate up` once per
//     release; secret.example.yaml, the Secret's keys with placeholder
//     values; kustomization.yaml, the CronJobs for `kubectl apply -k`.
//   - ../railway.cron.yml: the same schedules for Railway, one service per
//     job.
//   - ../Dockerfile: the image every manifest runs, with all four binaries.
//
// The tests read those files as data: every YAML document must parse (no
// tabs, no duplicate keys, no misspelled Kubernetes fields), every schedule
// must parse with robfig/cron's standard parser and match the documented
// one, every command must name a binary under cmd/, and every flag and
// environment variable a manifest passes must exist on that binary's cobra
// command, built by package internal/cli exactly as the binary builds it.
// Every scheduled binary keeps the shipped quiet hours (hours_test.go) and
// the same send budget (budget_test.go). There is no Go code here to
// import.
package deploy
