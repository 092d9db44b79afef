package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// machine describes where the figures were measured.
type machine struct {
	When       string            `json:"when"`
	CPU        string            `json:"cpu"`
	Cores      int               `json:"cores"`
	MemoryGiB  float64           `json:"memory_gib"`
	GoVersion  string            `json:"go_version"`
	PostgreSQL string            `json:"postgresql"`
	Settings   map[string]string `json:"settings"`
	LoadAvg    string            `json:"load_avg"` // at the start: others' work on the machine
}

// settingNames are the PostgreSQL settings that matter for these figures.
var settingNames = []string{"shared_buffers", "work_mem", "maintenance_work_mem", "effective_cache_size", "fsync",
	"synchronous_commit", "wal_level", "max_wal_size", "checkpoint_timeout", "jit", "max_connections", "random_page_cost"}

func describeMachine(ctx context.Context) (machine, error) {
	m := machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Settings: map[string]string{}}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				m.CPU = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%f", &kb)
		m.MemoryGiB = kb / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		return m, err
	}
	conn, err := pgx.Connect(ctx, srv)
	if err != nil {
		return m, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT version(), now()::text`).Scan(&m.PostgreSQL, &m.When); err != nil {
		return m, err
	}
	for _, s := range settingNames {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, s).Scan(&v); err != nil {
			return m, err
		}
		m.Settings[s] = v
	}
	return m, nil
}

func (m machine) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Machine\n\n%s, %d cores, %.1f GiB, load average at start %s, %s\n%s\n\n| setting | value |\n|---|---|\n",
		m.CPU, m.Cores, m.MemoryGiB, m.LoadAvg, m.GoVersion, m.PostgreSQL)
	for _, s := range settingNames {
		fmt.Fprintf(&b, "| `%s` | %s |\n", s, m.Settings[s])
	}
	return b.String()
}
